/*
 * 講座の検索ページ（Sphinx の searchtools.js に足すもの）。
 * - 語が 2 つ以上なら、すべての語を含むページだけ（Sphinx は 2 文字以下の語を数えないので、「KV キャッシュ」や
 *   「集団通信 通信」がどれか 1 つの語のページまで出す）。
 * - 並べ方：ページの題か最初の節の見出しが語を名指すページ（講座の順）、次に節の見出しにあるページ（講座の順）、
 *   そのほか（Sphinx の点、同じ点なら講座の順）。語は、用語集の英語と日本語、API 名の最後の部分（jax.shard_map →
 *   shard_map）も同じ語として比べる。
 * - 結果のリンクは、検索語がある節へ（見出しにあればその節、なければ本文で最初に出る節、用語集ならその用語）。
 * - 抜き出し（スニペット）は本文（article）の段落から。テーマの部品（配色の切り替え、目次）は使わない。数式は
 *   TeX のままではなく読める文字（\(\min(C,\ I \times B)\) → min(C, I × B)）に。
 * - 1 つのページは 1 度だけ（Sphinx は題・見出しの一致と本文の一致を別の結果にする）。点の高いほうを残す。
 */
"use strict";

const CourseSearch = {
  query() {
    return (new URLSearchParams(window.location.search).get("q") || "").trim();
  },

  terms() {
    const q = CourseSearch.query();
    return typeof splitQuery === "function" ? splitQuery(q) : q.toLowerCase().split(/\s+/).filter((t) => t);
  },

  synonyms() {
    return typeof COURSE_SYNONYMS === "undefined" ? {} : COURSE_SYNONYMS;
  },

  // 抜き出しに使う語：検索語と、英語の検索語に当たる日本語の用語
  words() {
    const words = new Set(CourseSearch.terms());
    const low = CourseSearch.query().toLowerCase();
    for (const [ja, names] of Object.entries(CourseSearch.synonyms())) {
      if (names.includes(low) || names.some((n) => words.has(n))) words.add(ja);
    }
    return [...words].filter((w) => w);
  },

  // 並べ方に使う語のまとまり：検索語ごとに、同じものを指す名前（用語集の英語・日本語、API 名の最後の部分）
  groups() {
    if (!CourseSearch._groups) {
      const syn = CourseSearch.synonyms();
      CourseSearch._groups = CourseSearch.terms().map((t) => {
        const g = new Set([t, ...(syn[t] || [])]);
        for (const [ja, names] of Object.entries(syn)) if (names.includes(t)) g.add(ja);
        const last = t.split(".").pop();
        if (t.includes(".") && last.length > 2) g.add(last);
        return [...g];
      });
    }
    return CourseSearch._groups;
  },

  has(text, words) {
    const low = (text || "").toLowerCase();
    return words.some((w) => low.includes(w));
  },

  hasAll(text, groups) {
    const low = (text || "").toLowerCase();
    return groups.length > 0 && groups.every((g) => g.some((w) => low.includes(w)));
  },

  // 索引で word を含むファイル（Sphinx の performTermsSearch と同じ引き方：ちょうどの語、なければ 3 文字以上で部分一致）
  filesFor(word) {
    const index = Search._index;
    const out = new Set();
    for (const table of [index.terms, index.titleterms]) {
      const add = (v) => (Array.isArray(v) ? v : [v]).forEach((f) => out.add(f));
      if (Object.prototype.hasOwnProperty.call(table, word)) add(table[word]);
      else if (word.length > 2) Object.keys(table).forEach((k) => { if (k.includes(word)) add(table[k]); });
    }
    return out;
  },

  // すべての検索語を含むページの結果だけ
  allTerms(results, searchTerms) {
    const terms = [...searchTerms];
    if (terms.length < 2) return results;
    const sets = terms.map((t) => CourseSearch.filesFor(t));
    const docnames = Search._index.docnames;
    return results.filter((r) => {
      const file = docnames.indexOf(r[0]);
      return sets.every((s) => s.has(file));
    });
  },

  // Sphinx の Scorer.score：題か最初の見出しが語を名指すページ、節の見出しにあるページ、そのほかの順
  score(result) {
    const index = Search._index;
    const file = index.docnames.indexOf(result[0]);
    const groups = CourseSearch.groups();
    const first = (typeof COURSE_FIRST_HEADINGS !== "undefined" && COURSE_FIRST_HEADINGS[result[0]]) || "";
    let tier = CourseSearch.hasAll(index.titles[file], groups) || CourseSearch.hasAll(first, groups) ? 2 : 0;
    if (!result[2]) {
      for (const [title, entries] of Object.entries(index.alltitles)) {
        if (!CourseSearch.hasAll(title, groups)) continue;
        const hit = entries.find(([f, id]) => f === file && id);
        if (hit) {
          result[2] = "#" + hit[1];
          if (title !== index.titles[file]) result[1] = `${index.titles[file]} › ${title}`;
          tier = Math.max(tier, 1);
          break;
        }
      }
    }
    // 同じ段のときは講座の順（左の列の並び。Sphinx は題の逆順で並べるので、ここで小さな差をつける）
    const order = CourseSearch.order();
    const pos = order.has(result[0]) ? order.get(result[0]) : order.size;
    const rank = (order.size + 1 - pos) / (order.size + 2);
    return tier * 1000 + (tier ? 0 : result[4]) + rank;
  },

  // Sphinx の結果（点の低い順。表示は後ろから）から、同じページの 2 つ目以降を除く（点の高いほうを残す）
  onePerPage(results) {
    const best = new Map();
    results.forEach((r, i) => {
      const page = r[0];
      if (!best.has(page) || results[best.get(page)][4] <= r[4]) best.set(page, i);
    });
    return results.filter((r, i) => best.get(r[0]) === i);
  },

  order() {
    if (!CourseSearch._order) {
      CourseSearch._order = new Map();
      document.querySelectorAll(".bd-sidebar-primary a.reference.internal").forEach((a) => {
        const doc = (a.getAttribute("href") || "").split("#")[0].replace(/\.html$/, "");
        if (doc && !CourseSearch._order.has(doc)) CourseSearch._order.set(doc, CourseSearch._order.size);
      });
    }
    return CourseSearch._order;
  },

  // TeX の式を、抜き出しで読める文字に（\frac{a}{b} → a/b、\times → ×、\text{…} → …）
  TEX_SYMBOLS: {
    times: "×", cdot: "·", le: "≤", leq: "≤", ge: "≥", geq: "≥", approx: "≈", ne: "≠", neq: "≠", to: "→",
    rightarrow: "→", leftarrow: "←", infty: "∞", sum: "Σ", prod: "Π", ldots: "…", cdots: "…", dots: "…",
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", eta: "η", theta: "θ", lambda: "λ", mu: "μ",
    pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Delta: "Δ", Sigma: "Σ", lceil: "⌈", rceil: "⌉",
    lfloor: "⌊", rfloor: "⌋", quad: " ", qquad: " ", ",": " ", ";": " ", ":": " ", "!": "", " ": " ",
    "{": "(", "}": ")", "%": "%", "_": "_", "#": "#", "&": "&",
  },

  texText(tex) {
    let s = tex.trim().replace(/^\\[([]/, "").replace(/\\[)\]]$/, "").replace(/^\$+|\$+$/g, "");
    for (let k = 0; k < 4; k++) s = s.replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)");
    s = s.replace(/\\(?:text|mathrm|mathbf|mathit|mathsf|mathtt|texttt|textrm|operatorname|boldsymbol)\s*\{([^{}]*)\}/g, "$1");
    s = s.replace(/\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])/g, "");
    s = s.replace(/\\([A-Za-z]+|.)/g, (m, name) => (name in CourseSearch.TEX_SYMBOLS ? CourseSearch.TEX_SYMBOLS[name] : name));
    s = s.replace(/\(([^()\s]+)\)\/\(([^()\s]+)\)/g, "$1/$2");
    return s.replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
  },

  // 本文の文の要素（抜き出しはまずここから取る）
  PROSE: "p, li, dd, dt, td, th, figcaption",

  // ページの HTML から、テーマの部品・見出しのリンク・スクリプトを除き、数式を文字にした本文（article）。なければ null
  article(htmlText) {
    const doc = new DOMParser().parseFromString(htmlText, "text/html");
    const article = doc.querySelector("article.bd-article") || doc.querySelector("article");
    if (!article) return null;
    article.querySelectorAll(
      ".headerlink, script, style, .course-links, .toctree-wrapper, mjx-assistive-mml, .course-copy",
    ).forEach((el) => el.remove());
    article.querySelectorAll(".math").forEach((el) => {
      el.replaceWith(doc.createTextNode(CourseSearch.texText(el.textContent)));
    });
    return article;
  },

  // 本文から、検索語を含む最初の段落の抜き出し（と、その段落がある節の id と見出し。用語集なら用語の id）
  summary(htmlText, keywords, anchor) {
    const article = CourseSearch.article(htmlText);
    if (!article) return null;
    const words = [...new Set([...keywords].map((k) => k.toLowerCase()).concat(CourseSearch.words()))];
    const groups = CourseSearch.terms().map((t) => [t, ...words.filter((w) => w !== t && !CourseSearch.terms().includes(w))]);
    const scope = (anchor && article.querySelector(anchor)) || article;
    // 用語の見出し（dt）、段落、見出し、最後にコードの順に。すべての語を含む要素を先に
    let hit = null;
    for (const test of [(t) => CourseSearch.hasAll(t, groups), (t) => CourseSearch.has(t, words)]) {
      for (const selector of ["dt", CourseSearch.PROSE, "h1, h2, h3, h4", "pre"]) {
        for (const scopeEl of scope === article ? [article] : [scope, article]) {
          hit = [...scopeEl.querySelectorAll(selector)].find((el) => test(el.textContent));
          if (hit) break;
        }
        if (hit) break;
      }
      if (hit) break;
    }
    const text = (hit || article.querySelector("p") || article).textContent.replace(/\s+/g, " ").trim();
    const low = text.toLowerCase();
    const at = Math.min(...words.map((w) => low.indexOf(w)).filter((i) => i >= 0), text.length);
    const start = at >= text.length || at < 50 ? 0 : at - 50;
    const end = Math.min(text.length, start + 180);
    const p = document.createElement("p");
    p.classList.add("context");
    p.textContent = (start > 0 ? "…" : "") + text.slice(start, end) + (end < text.length ? "…" : "");
    if (anchor || !hit) return p;
    // 用語集：その用語（dt、または定義 dd の前の dt）の id へ
    const term = hit.matches("dt") ? hit : hit.closest("dd") && hit.closest("dd").previousElementSibling;
    if (term && term.matches("dt[id]")) {
      p.dataset.section = term.id;
      p.dataset.sectionTitle = term.textContent.trim();
      return p;
    }
    const section = hit.closest("section[id]");
    if (section) {
      p.dataset.section = section.id;
      const h = section.querySelector("h1, h2, h3, h4");
      // ページの題の節（いちばん外の節）の見出しは、題と同じなので添えない
      if (h && section.parentElement && section.parentElement.closest("section[id]")) {
        p.dataset.sectionTitle = h.textContent.trim();
      }
    }
    return p;
  },

  // 抜き出しが届いたら、リンクを節へ
  linkSections(list) {
    new MutationObserver((records) => {
      for (const r of records) {
        for (const node of r.addedNodes) {
          if (!(node instanceof HTMLElement) || !node.matches("p.context[data-section]")) continue;
          const a = node.parentElement.querySelector("a");
          if (a && !a.getAttribute("href").includes("#")) {
            a.setAttribute("href", a.getAttribute("href") + "#" + node.dataset.section);
            if (node.dataset.sectionTitle) a.textContent += " › " + node.dataset.sectionTitle;
          }
        }
      }
    }).observe(list, { childList: true, subtree: true });
  },
};

document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || typeof Scorer === "undefined") return;
  Scorer.score = CourseSearch.score;
  const performSearch = Search._performSearch;
  Search._performSearch = (...args) => CourseSearch.onePerPage(CourseSearch.allTerms(performSearch(...args), args[1]));
  Search.makeSearchSummary = CourseSearch.summary;
  const results = document.getElementById("search-results");
  if (results) CourseSearch.linkSections(results);
});
