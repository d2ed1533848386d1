"""6.3c のチェックのテストが共有する部品。"""
import jax

N = jax.device_count()
