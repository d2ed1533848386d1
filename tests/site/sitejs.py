"""ページの上で測る JavaScript：LAYOUT_JS（幅ごとの配置。問題のあるものだけを返す）と CHROME_JS（画面の部品の文字と属性）。"""

# 幅ごとに確かめること（1 ページ分。問題のあるものだけを返す）
LAYOUT_JS = r"""(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const doc = document.documentElement;
  const art = document.querySelector("article.bd-article") || document.querySelector("article") || document.body;
  const right = art.getBoundingClientRect().right;
  const short = (el) => (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 70);
  const out = {width: doc.clientWidth, overflow: doc.scrollWidth > doc.clientWidth + 1 ? doc.scrollWidth : 0};
  out.wide_tables = [...art.querySelectorAll("table")]
    .filter((t) => t.getBoundingClientRect().right > right + 1 || t.scrollWidth > t.clientWidth + 1)
    .map((t) => `${Math.round(t.getBoundingClientRect().width)} px: ${t.textContent.replace(/\s+/g, " ").trim().slice(0, 70)}`);
  // 生の Markdown の表：コードの入力の外の文字に |---| の行
  const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
  out.pipe_tables = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest(".cell_input, .highlight-python, .highlight-bash, .highlight-toml, .highlight-default")) continue;
    if (/\|\s*:?-{3,}:?\s*\|/.test(n.textContent)) out.pipe_tables.push(short(n.parentElement));
  }
  const maths = [...art.querySelectorAll(".math")];
  out.math_count = maths.length;
  out.math_unrendered = maths.filter((m) => !m.querySelector("mjx-container")).map(short);
  out.math_overflow = [];
  for (const box of art.querySelectorAll("div.math")) {
    const eq = box.querySelector("mjx-container");
    if (!eq) continue;
    const inner = eq.querySelector("mjx-math") || eq;
    const wide = inner.getBoundingClientRect().width > box.clientWidth + 1;
    // 余計なスクロールバー：縦にあふれる、または広くない式なのに横のスクロールバー（の場所）がある
    const stray = box.scrollHeight > box.clientHeight + 1
      || (!wide && (box.scrollWidth > box.clientWidth + 1 || box.offsetHeight - box.clientHeight > 1));
    const outside = box.getBoundingClientRect().right > right + 1;
    if (outside || stray || (wide && doc.clientWidth >= 1000)) out.math_overflow.push(
      `${Math.round(inner.getBoundingClientRect().width)} px in ${box.clientWidth} px${stray ? " (scrollbar)" : ""}: ${eq.getAttribute("aria-label") || short(box)}`);
  }
  out.bad_alts = [...art.querySelectorAll("img")].map((i) => i.getAttribute("alt") || "")
    .filter((a) => !a.trim() || /\.(png|svg|jpe?g|gif)$/i.test(a) || a.includes("/"));
  out.figures = art.querySelectorAll("img.course-figure").length;
  out.code_cells = art.querySelectorAll(".cell_input div.highlight").length;
  out.code_scrolling = [...art.querySelectorAll(".cell_input div.highlight pre")].filter((p) => p.scrollWidth > p.clientWidth + 1).length;
  out.copy_buttons = art.querySelectorAll(".cell_input div.highlight button.course-copy").length;
  out.outputs_scrolling = [...art.querySelectorAll(".cell_output pre:not(.course-diagram)")]
    .filter((p) => !p.closest(".course-diagram, .course-printed-table") && p.scrollWidth > p.clientWidth + 1).map(short);
  // 左端が切れた数式：式の左が箱の左より外（スクロールしても見えない）
  out.math_cut = [...art.querySelectorAll("div.math")].filter((box) => {
    const inner = box.querySelector("mjx-math");
    return inner && inner.getBoundingClientRect().left < box.getBoundingClientRect().left - box.scrollLeft - 1;
  }).map((box) => (box.querySelector("mjx-container") || box).getAttribute("aria-label") || short(box));
  // 印刷された表（ch6.show.table）：見出し、その下の「----  ----」、表の幅を超えない行。1 行が 2 行以上に折り返されたもの
  const cjk = /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/;
  const dispWidth = (s) => [...s].reduce((n, ch) => n + (cjk.test(ch) ? 2 : 1), 0);
  const lineBoxes = (pre, a, b) => {
    const range = document.createRange();
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let pos = 0, started = false;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const len = n.textContent.length;
      if (!started && a <= pos + len) { range.setStart(n, a - pos); started = true; }
      if (started && b <= pos + len) { range.setEnd(n, b - pos); break; }
      pos += len;
    }
    return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  };
  out.printed_tables = 0;
  out.wrapped_tables = [];
  for (const pre of art.querySelectorAll(".cell_output pre")) {
    const lines = pre.textContent.split("\n");
    const starts = [];
    lines.reduce((pos, line) => { starts.push(pos); return pos + line.length + 1; }, 0);
    for (let i = 1; i < lines.length; i++) {
      const rule = lines[i].trimEnd();
      if (!/^-{2,}(?: {2}-{2,})*$/.test(rule) || !lines[i - 1].trim()) continue;
      let end = i + 1;
      while (end < lines.length && lines[end].trim() && dispWidth(lines[end].trimEnd()) <= dispWidth(rule)) end++;
      out.printed_tables += 1;
      const wrapped = [];
      for (let k = i - 1; k < end; k++) {
        if (lineBoxes(pre, starts[k], starts[k] + lines[k].trimEnd().length) > 1) wrapped.push(k);
      }
      if (wrapped.length) out.wrapped_tables.push(`${wrapped.length} / ${end - i + 1} 行が折り返す: ${lines[i - 1].trim().slice(0, 60)}`);
    }
  }
  // つぶれた表：12 文字以上のセルが、字の大きさの 6 倍より細い（1 行に 5 文字ほど）
  out.squeezed_tables = [...art.querySelectorAll("table")].map((t) => {
    const cells = [...t.querySelectorAll("td, th")].filter((c) => {
      if (c.textContent.trim().length < 12 || !c.getClientRects().length) return false;
      const cs = getComputedStyle(c);
      return c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) < 6 * parseFloat(cs.fontSize);
    });
    return cells.length ? `${cells.length} セル、高さ ${Math.round(t.getBoundingClientRect().height)} px: ${short(t)}` : "";
  }).filter((x) => x);
  // 図：表示の大きさ（width 属性）の何倍で見えているか。リンク（PNG そのもの）に包まれた図
  const figs = [...art.querySelectorAll("img.course-figure")];
  out.small_figures = figs.filter((i) => Number(i.getAttribute("width")))
    .map((i) => [i.getBoundingClientRect().width / Number(i.getAttribute("width")), i.alt])
    .filter(([scale]) => scale < 0.6).map(([scale, alt]) => `${scale.toFixed(2)} 倍: ${alt.slice(0, 60)}`);
  out.figure_links = figs.filter((i) => i.closest("a[href]")).map((i) => `${i.closest("a[href]").getAttribute("href")}: ${i.alt.slice(0, 40)}`);
  // 本文のコードの中の API 名（jax. / lax. / jnp.）と、リファレンス（docs.jax.dev）へのリンクのないもの
  const apiName = /(?<![\w.\-\/:])(?:jax|lax|jnp)(?:\.[A-Za-z_]\w*)+/g;
  out.api_names = 0;
  out.api_unlinked = [];
  for (const code of art.querySelectorAll("code")) {
    if (code.closest("pre, .cell_output, .highlight, h1, h2, h3, h4, h5, h6, .course-links")) continue;
    const linked = new Set([...code.querySelectorAll('a[href^="https://docs.jax.dev/"]')].map((a) => a.textContent));
    for (const m of code.textContent.matchAll(apiName)) {
      out.api_names += 1;
      if (!code.closest("a[href]") && !linked.has(m[0])) out.api_unlinked.push(m[0]);
    }
  }
  // API 名のリンクが、その名前の項目ではなく親のページや検索に行くもの（項目のない名前は文書のページ：course-api-guide）
  out.api_off_entry = [...art.querySelectorAll("a.course-api")].filter((a) => {
    const href = a.getAttribute("href") || "";
    return href.includes("search.html") || (!a.classList.contains("course-api-guide") && !href.includes(a.title));
  }).map((a) => `${a.title} → ${a.getAttribute("href")}`);
  // コピーのボタンがコードの上に重なる（電話の幅）
  out.copy_covering = [...art.querySelectorAll(".cell_input div.highlight")].filter((box) => {
    const b = box.querySelector(".course-copy"), pre = box.querySelector("pre");
    if (!b || !pre) return false;
    const r = b.getBoundingClientRect(), q = pre.getBoundingClientRect();
    return r.width > 0 && r.left < q.right && r.right > q.left && r.top < q.bottom && r.bottom > q.top;
  }).map((box) => short(box.querySelector("pre")));
  // 表のままで収まるのにカードになった表：カードの印を外した写しを同じ所に置いて測る
  out.needless_cards = [...art.querySelectorAll("table.course-stack")].filter((t) => {
    const copy = t.cloneNode(true);
    copy.classList.remove("course-stack");
    copy.style.visibility = "hidden";
    t.after(copy);
    const fits = !CourseUI.squeezed(copy);
    copy.remove();
    return fits;
  }).map(short);
  // 本文のコードが語の途中（英字・数字の間）で折り返す
  out.code_midword = [];
  for (const code of art.querySelectorAll("code.literal")) {
    if (code.closest("pre") || code.getClientRects().length < 2 || /\s/.test(code.textContent.trim())) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let prev = null;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (let i = 0; i < n.textContent.length; i++) {
        const range = document.createRange();
        range.setStart(n, i); range.setEnd(n, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        const ch = n.textContent[i];
        if (prev && rect.top > prev.top + 2 && /[A-Za-z0-9]/.test(prev.ch) && /[A-Za-z0-9]/.test(ch)) {
          out.code_midword.push(`${code.textContent.slice(0, 60)}（${prev.ch}|${ch}）`);
        }
        prev = {top: rect.top, ch};
      }
    }
  }
  // 表（カードでない表）のセルの中で 2 行に分かれる識別子のコード（`print_saved_residuals` が print_saved_ / residuals）。
  // . _ ( の後ろの折り返し（wbr）でも、表の列では名前が読めなくなる（6.7 の 4.6 節の 2 列の表）。名前を 1 行にしても
  // 表が列に収まるものだけ（収まらない長い名前は折り返すほかない）。1 行にするのはここで直接（style）試す
  out.table_code_split = [];
  for (const code of art.querySelectorAll("td code.literal, th code.literal")) {
    const table = code.closest("table");
    if (table.closest(".course-stack") || /\s/.test(code.textContent.trim()) || code.getClientRects().length < 2) continue;
    const parts = [code, ...code.querySelectorAll("*")];
    const saved = parts.map((el) => el.getAttribute("style"));
    parts.forEach((el) => { el.style.whiteSpace = "nowrap"; if (el.tagName === "WBR") el.style.display = "none"; });
    const fits = table.getBoundingClientRect().width <= table.parentElement.clientWidth + 1;
    parts.forEach((el, i) => saved[i] === null ? el.removeAttribute("style") : el.setAttribute("style", saved[i]));
    if (fits) out.table_code_split.push(`${code.textContent.trim().slice(0, 60)}（${short(code.closest("tr")).slice(0, 40)}）`);
  }
  return out;
})()"""

# 画面の部品の文字と属性（本文の外の文字、すべての title・aria-label・placeholder、ボタンの文字）
CHROME_JS = r"""(() => {
  const art = document.querySelector("article.bd-article");
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || el.closest("script, style, noscript, code, pre, mjx-container")) continue;
    if (art && art.contains(el) && !el.closest("button, .course-links")) continue;
    // ページの題（ナビゲーション・目次・前後のページ・検索の結果）は本文の文字
    if (el.closest("a.reference, .bd-toc a, .prev-next-title, #search-results li, .navbar-brand, .bd-links a, h1")) continue;
    if (getComputedStyle(el).display === "none" || el.closest("[hidden]")) continue;
    texts.push(n.textContent.trim());
  }
  const attrs = [];
  document.querySelectorAll("[title], [aria-label], [placeholder], button").forEach((el) => {
    if (el.matches("link, meta") || el.closest("head, mjx-container")) return;  // <link rel="next" title="ページの題">
    for (const a of ["title", "aria-label", "placeholder"]) {
      const v = el.getAttribute(a);
      if (v && !el.matches("a.course-term, a.reference, .bd-links a, .toc-entry a")) attrs.push(v);
    }
    if (el.tagName === "BUTTON" && el.textContent.trim()) attrs.push(el.textContent.trim());
  });
  return {texts, attrs};
})()"""
