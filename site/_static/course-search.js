/*
 * 講座の検索ページ（Sphinx の searchtools.js に足すもの）。
 * - 並べ方：ページの題に検索語があるページ、次に節の見出しにあるページ、そのほか、の順（同じ点なら講座の順）。
 * - 結果のリンクは、検索語がある節へ（見出しにあればその節、なければ本文で最初に出る節）。
 * - 抜き出し（スニペット）は本文（article）の段落から。テーマの部品（配色の切り替え、目次）は使わない。
 * - 検索語が用語集の英語（collective など）なら、その日本語の用語（集団通信）も題・見出し・本文で探す。
 * - 1 つのページは 1 度だけ（Sphinx は題・見出しの一致と本文の一致を別の結果にするので、同じページが 2 度出て
 *   件数も 2 と数える）。点の高いほうを残す。
 */
"use strict";

const CourseSearch = {
  words() {
    const q = (new URLSearchParams(window.location.search).get("q") || "").trim();
    const low = q.toLowerCase();
    const words = new Set(typeof splitQuery === "function" ? splitQuery(q) : low.split(/\s+/));
    if (low) words.add(low);
    if (typeof COURSE_SYNONYMS !== "undefined") {
      for (const [ja, names] of Object.entries(COURSE_SYNONYMS)) {
        if (names.includes(low) || names.some((n) => words.has(n))) words.add(ja);
      }
    }
    return [...words].filter((w) => w);
  },

  has(text, words) {
    const low = (text || "").toLowerCase();
    return words.some((w) => low.includes(w));
  },

  // Sphinx の Scorer.score：題・見出しの一致に点を足し、見出しが合う節をリンクの行き先にする
  score(result) {
    const index = Search._index;
    const file = index.docnames.indexOf(result[0]);
    const words = CourseSearch.words();
    let bonus = 0;
    if (CourseSearch.has(index.titles[file], words)) bonus += 40;
    if (!result[2]) {
      for (const [title, entries] of Object.entries(index.alltitles)) {
        if (!CourseSearch.has(title, words)) continue;
        const hit = entries.find(([f, id]) => f === file && id);
        if (hit) {
          result[2] = "#" + hit[1];
          if (title !== index.titles[file]) result[1] = `${index.titles[file]} › ${title}`;
          bonus += 20;
          break;
        }
      }
    }
    // 同じ点のときは講座の順（左の列の並び。Sphinx は題の逆順で並べるので、ここで小さな差をつける）
    const order = CourseSearch.order();
    const pos = order.has(result[0]) ? order.get(result[0]) : order.size;
    return result[4] + bonus + (order.size + 1 - pos) / 1000;
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

  // 本文の文の要素（抜き出しはまずここから取る）
  PROSE: "p, li, dd, dt, td, th, figcaption",

  // ページの HTML から、テーマの部品・見出しのリンク・スクリプトを除いた本文（article）。なければ null
  article(htmlText) {
    const doc = new DOMParser().parseFromString(htmlText, "text/html");
    const article = doc.querySelector("article.bd-article") || doc.querySelector("article");
    if (!article) return null;
    article.querySelectorAll(
      ".headerlink, script, style, .course-links, .toctree-wrapper, mjx-assistive-mml, .course-copy",
    ).forEach((el) => el.remove());
    return article;
  },

  // 本文から、検索語を含む最初の段落の抜き出し（と、その段落がある節の id と見出し）
  summary(htmlText, keywords, anchor) {
    const article = CourseSearch.article(htmlText);
    if (!article) return null;
    const words = [...new Set([...keywords].map((k) => k.toLowerCase()).concat(CourseSearch.words()))];
    const scope = (anchor && article.querySelector(anchor)) || article;
    // 段落から探し、なければ見出し、最後にコード
    let hit = null;
    for (const selector of [CourseSearch.PROSE, "h1, h2, h3, h4", "pre"]) {
      for (const scopeEl of scope === article ? [article] : [scope, article]) {
        hit = [...scopeEl.querySelectorAll(selector)].find((el) => CourseSearch.has(el.textContent, words));
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
    const section = hit && hit.closest("section[id]");
    if (section && !anchor) {
      p.dataset.section = section.id;
      const h = section.querySelector("h1, h2, h3, h4");
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
  Search._performSearch = (...args) => CourseSearch.onePerPage(performSearch(...args));
  Search.makeSearchSummary = CourseSearch.summary;
  const results = document.getElementById("search-results");
  if (results) CourseSearch.linkSections(results);
});
