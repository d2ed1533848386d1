/*
 * 講座のページの小さな道具（ネットを使いません）：
 * - コードのセルに「コピー」ボタン（クリップボードの API が使えないときは選択してコピー）
 * - 図をクリック（または Enter）で拡大して表示（Esc・クリックで閉じる）。ページは移らない（図が PNG への
 *   リンクの中にあっても、そのリンクには行かない）。図の表示の大きさを --course-fig-w に（CSS が電話の幅で使う）
 * - 列の多い表（3 列以上）で電話の幅に収まらないものに course-stack と、各セルに列の見出し（data-label）：1 行 1 枚のカードに
 * - 拡大した図はまず画面に収め（クリックで原寸）、ブラウザの「戻る」は拡大を閉じるだけ
 * - 電話の幅では、用語のリンクをタップすると定義をその場に出す。本文のコードは . _ ( などの後ろでだけ折り返す
 * - 電話の幅の表のセルの識別子のコードは、表が列に収まるかぎり 2 行に分けない（course-whole）
 * - レッスンのリンクの行に「印刷・PDF」ボタン（印刷用のスタイルはコードを折り返して切らない）
 */
"use strict";

const CourseUI = {
  copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(() => CourseUI.copyBySelection(text));
    }
    return Promise.resolve(CourseUI.copyBySelection(text));
  },

  copyBySelection(text) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try {
      document.execCommand("copy");
    } finally {
      area.remove();
    }
  },

  addCopyButtons() {
    document.querySelectorAll("article div.highlight").forEach((box) => {
      if (box.closest(".cell_output") || box.querySelector(".course-copy")) return;
      const pre = box.querySelector("pre");
      if (!pre) return;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "course-copy";
      button.textContent = "コピー";
      button.setAttribute("aria-label", "このコードをコピー");
      button.addEventListener("click", () => {
        CourseUI.copyText(pre.innerText.replace(/\n$/, "")).then(() => {
          button.textContent = "コピーしました";
          button.classList.add("done");
          setTimeout(() => {
            button.textContent = "コピー";
            button.classList.remove("done");
          }, 2000);
        });
      });
      box.appendChild(button);
    });
  },

  zoom(img) {
    const overlay = document.createElement("div");
    overlay.className = "course-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "拡大した図");
    const big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    // まず画面に収まる大きさで（course-zoom-fit）。図をクリックすると、保存された解像度（表示の 2 倍）に
    big.className = "course-zoom-fit";
    big.title = "クリックで原寸／画面の幅";
    big.addEventListener("click", () => big.classList.toggle("course-zoom-fit"));
    const caption = document.createElement("p");
    caption.textContent = img.alt;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "course-zoom-close";
    close.textContent = "閉じる（Esc）";
    const frame = document.createElement("div");
    frame.className = "course-zoom-frame";
    frame.append(big, caption);
    overlay.append(close, frame);
    // ブラウザの「戻る」は拡大を閉じるだけ（ページを離れない）：開くときに履歴を 1 つ足し、戻ったら閉じる
    let closed = false;
    const close_ = () => {
      if (closed) return;
      closed = true;
      overlay.remove();
      document.removeEventListener("keydown", onKey);
      window.removeEventListener("popstate", onPop);
      img.focus({ preventScroll: true });
    };
    const onPop = () => close_();
    const done = () => {
      if (closed) return;
      if (history.state && history.state.courseZoom) history.back();  // popstate が閉じる
      else close_();
    };
    const onKey = (e) => {
      if (e.key === "Escape") done();
    };
    overlay.addEventListener("click", (e) => {
      if (e.target === overlay || e.target === close) done();
    });
    document.addEventListener("keydown", onKey);
    history.pushState({ courseZoom: true }, "");
    window.addEventListener("popstate", onPop);
    document.body.appendChild(overlay);
    close.focus();
  },

  addZoom() {
    document.querySelectorAll("article img.course-figure").forEach((img) => {
      img.tabIndex = 0;
      img.setAttribute("role", "button");
      img.title = "クリックで拡大";
      const width = Number(img.getAttribute("width"));
      if (width) img.style.setProperty("--course-fig-w", width + "px");
      img.addEventListener("click", (e) => {
        e.preventDefault();  // 図を包むリンク（PNG そのもの）へは行かない
        CourseUI.zoom(img);
      });
      img.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          CourseUI.zoom(img);
        }
      });
    });
  },

  // 3 列以上の表で、電話の幅で表のままでは収まらないもの（列の幅を超える、または 12 文字以上のセルが 1 行に
  // 5 文字ほどの細さになる）だけをカードに（CSS）。収まる小さな表は表のまま。各セルに列の見出しを data-label として
  PHONE: "(max-width: 575.98px)",

  squeezed(table) {
    const box = table.parentElement;
    if (table.getBoundingClientRect().width > box.clientWidth + 1) return true;
    return [...table.querySelectorAll("td, th")].some((c) => {
      if (c.textContent.trim().length < 12) return false;
      const cs = getComputedStyle(c);
      return c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) < 6 * parseFloat(cs.fontSize);
    });
  },

  stackTables() {
    const phone = window.matchMedia(CourseUI.PHONE).matches;
    document.querySelectorAll("article table").forEach((table) => {
      const head = table.tHead && table.tHead.rows[0];
      if (!head || head.cells.length < 3) return;
      table.classList.remove("course-stack");
      if (phone && !CourseUI.squeezed(table)) return;
      const labels = [...head.cells].map((c) => c.textContent.trim());
      table.classList.add("course-stack");
      for (const body of table.tBodies) {
        for (const row of body.rows) {
          [...row.cells].forEach((cell, i) => cell.setAttribute("data-label", labels[i] || ""));
        }
      }
    });
  },

  // 電話の幅で表のまま残る表（2 列の表、収まる小さな表）のセルの識別子のコードは、表が列に収まるかぎり 2 行に
  // 分けない（印 course-whole：CSS が折り返しと wbr を止める）。6.7 の 4.6 節の表が print_saved_ / residuals に
  // 分かれていた。列に収まらない長い名前（jax.debug.visualize_array_sharding）は . _ ( の後ろで折り返したまま
  keepCodeWhole() {
    const codes = [...document.querySelectorAll("article td code.literal, article th code.literal")];
    codes.forEach((code) => code.classList.remove("course-whole"));
    if (!window.matchMedia(CourseUI.PHONE).matches) return;
    for (const code of codes) {
      const table = code.closest("table");
      if (table.classList.contains("course-stack") || /\s/.test(code.textContent.trim())
          || code.getClientRects().length < 2) continue;
      code.classList.add("course-whole");
      if (table.getBoundingClientRect().width > table.parentElement.clientWidth + 1) code.classList.remove("course-whole");
    }
  },

  // 本文のコード（`jax.sharding.NamedSharding`）は、. _ ( , / の後ろでだけ折り返す（語の途中で切らない）
  addCodeBreaks() {
    document.querySelectorAll("article code.literal:not(pre code)").forEach((code) => {
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      const texts = [];
      for (let n = walker.nextNode(); n; n = walker.nextNode()) texts.push(n);
      for (const n of texts) {
        const parts = n.textContent.split(/(?<=[._(,/=\[])(?=[^\s])/);
        if (parts.length < 2) continue;
        const frag = document.createDocumentFragment();
        parts.forEach((part, i) => {
          if (i) frag.appendChild(document.createElement("wbr"));
          frag.appendChild(document.createTextNode(part));
        });
        n.replaceWith(frag);
      }
    });
  },

  // 用語のリンク（a.course-term）：電話の幅では、タップで定義をその場に出す（ツールチップは電話では出ない）。
  // 定義の下の「用語集で見る」で用語集へ。もう一度タップすると閉じる
  addTermNotes() {
    document.querySelectorAll("article a.course-term[title]").forEach((a) => {
      a.dataset.definition = a.title;
      a.addEventListener("click", (e) => {
        if (!window.matchMedia(CourseUI.PHONE).matches) return;
        e.preventDefault();
        const open = a.nextElementSibling && a.nextElementSibling.matches(".course-term-note") ? a.nextElementSibling : null;
        document.querySelectorAll(".course-term-note").forEach((n) => n.remove());
        if (open) return;
        const note = document.createElement("span");
        note.className = "course-term-note";
        note.setAttribute("role", "note");
        note.textContent = a.dataset.definition + " ";
        const more = document.createElement("a");
        more.href = a.getAttribute("href");
        more.textContent = "用語集で見る";
        note.appendChild(more);
        a.after(note);
      });
    });
  },

  // 1500 px 未満では右の列の目次を隠すので、同じ目次を本文の先頭にも置く（CSS が幅で出し分ける）
  addPageToc() {
    const toc = document.querySelector(".bd-sidebar-secondary nav.page-toc ul, .bd-sidebar-secondary .page-toc ul");
    const article = document.querySelector("article.bd-article");
    if (!toc || !article || !toc.querySelector("a")) return;
    const details = document.createElement("details");
    details.className = "course-page-toc";
    const summary = document.createElement("summary");
    summary.textContent = "このページの内容";
    details.append(summary, toc.cloneNode(true));
    const links = article.querySelector(".course-links");
    const title = article.querySelector("h1");
    if (links) links.after(details);
    else if (title) title.after(details);
    else article.prepend(details);
  },

  // 印刷された表の桁数（全角は 2 桁）：印刷では、この桁数が紙の幅に収まる字の大きさにする（course.css）
  measurePrintedTables() {
    const wide = /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/;
    document.querySelectorAll(".cell_output .course-printed-table pre").forEach((pre) => {
      const cols = Math.max(...pre.textContent.split("\n").map((l) => [...l.trimEnd()].reduce((n, ch) => n + (wide.test(ch) ? 2 : 1), 0)));
      pre.style.setProperty("--course-cols", String(Math.max(cols, 20)));
    });
  },

  addPrintButton() {
    const list = document.querySelector("article .course-links ul");
    if (!list) return;
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "course-print";
    button.textContent = "印刷・PDF に保存";
    button.addEventListener("click", () => window.print());
    li.appendChild(button);
    list.appendChild(li);
  },
};

document.addEventListener("DOMContentLoaded", () => {
  CourseUI.addCopyButtons();
  CourseUI.addZoom();
  CourseUI.addCodeBreaks();
  CourseUI.measurePrintedTables();
  CourseUI.stackTables();
  CourseUI.keepCodeWhole();
  window.matchMedia(CourseUI.PHONE).addEventListener("change", () => {
    CourseUI.stackTables();
    CourseUI.keepCodeWhole();
  });
  // 字の幅は字体が読み込まれてから決まる
  if (document.fonts) document.fonts.ready.then(() => CourseUI.keepCodeWhole());
  CourseUI.addTermNotes();
  CourseUI.addPrintButton();
  CourseUI.addPageToc();
});
