#!/usr/bin/env bash
# On a machine with an accelerator and its own JAX, but no network and no project venv (such as the device machine
# with a TPU, whose JAX is on PYTHONPATH): install what the course needs beside that JAX into /tmp/ch6-site, once,
# from the machine's package index, plus the wheels carried in .tpu/whl (those the index lacks). Source it:
#   source tools/accelerator_prep.sh && python3 tools/accelerator.py
# The JAX already there stays first on PYTHONPATH, so a JAX that pip brings along never hides it.
SITE=/tmp/ch6-site
if [ ! -f $SITE/.ok ]; then
  PIP_CONFIG_FILE=/dev/null "${PY:-python3}" -m pip install --isolated -q --only-binary=:all: --no-cache-dir \
    --index-url "${CH6_INDEX:-file:///opt/pypi/simple}" --target $SITE \
    optax orbax-checkpoint matplotlib rich nbformat ipython > /tmp/ch6-pip.log 2>&1 \
  && PIP_CONFIG_FILE=/dev/null "${PY:-python3}" -m pip install --isolated -q --no-index --no-deps --no-cache-dir --upgrade \
    --target $SITE .tpu/whl/*.whl >> /tmp/ch6-pip.log 2>&1 \
  && touch $SITE/.ok || { echo "pip failed"; tail -n 15 /tmp/ch6-pip.log; }
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD:$SITE
export MPLBACKEND=Agg
