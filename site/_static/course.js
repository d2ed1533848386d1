/*
 * 講座のページの小さな道具（ネットを使いません）：
 * - コードのセルに「コピー」ボタン（クリップボードの API が使えないときは選択してコピー）
 * - 図をクリック（または Enter）で拡大して表示（Esc・クリックで閉じる）。ページは移らない（図が PNG への
 *   リンクの中にあっても、そのリンクには行かない）。図の表示の大きさを --course-fig-w に（CSS が電話の幅で使う）
 * - 列の多い表（3 列以上）に course-stack と、各セルに列の見出し（data-label）：電話の幅では 1 行 1 枚のカードに
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
    // 2 倍に（高解像度で保存された図なら、その解像度のまま）
    const shown = img.getAttribute("width") ? Number(img.getAttribute("width")) : img.naturalWidth;
    big.style.width = Math.round(Math.max(img.naturalWidth, shown * 2)) + "px";
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
    const done = () => {
      overlay.remove();
      document.removeEventListener("keydown", onKey);
      img.focus();
    };
    const onKey = (e) => {
      if (e.key === "Escape") done();
    };
    overlay.addEventListener("click", (e) => {
      if (e.target === overlay || e.target === close) done();
    });
    document.addEventListener("keydown", onKey);
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

  // 3 列以上の表：電話の幅ではカードに（CSS）。各セルに、その列の見出しを data-label として
  stackTables() {
    document.querySelectorAll("article table").forEach((table) => {
      const head = table.tHead && table.tHead.rows[0];
      if (!head || head.cells.length < 3) return;
      const labels = [...head.cells].map((c) => c.textContent.trim());
      table.classList.add("course-stack");
      for (const body of table.tBodies) {
        for (const row of body.rows) {
          [...row.cells].forEach((cell, i) => cell.setAttribute("data-label", labels[i] || ""));
        }
      }
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
  CourseUI.stackTables();
  CourseUI.addPrintButton();
  CourseUI.addPageToc();
});
