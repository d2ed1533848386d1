/*
 * 講座の検索語の切り方（site/course_site.py の query_terms と同じ規則）。
 * 用語集の語はそのまま 1 語、英字・数字・_ を . や - でつないだもの（psum_scatter、all-gather）は 1 語、
 * ほかは漢字・カタカナの続き（ひらがなと記号で切る）。何も残らなければ空白で切る。
 */
const COURSE_WORDS = __COURSE_WORDS__;
// 用語集の日本語の用語 → 英語の名前（検索の同義語。course-search.js が題と節の見出しを比べるのに使う）
const COURSE_SYNONYMS = __COURSE_SYNONYMS__;
const COURSE_ASCII = /[a-z0-9_]+(?:[.\-][a-z0-9_]+)*/y;

function courseIsRunChar(ch) {
  return ch.charCodeAt(0) > 0x7f
    && !(ch >= "\u3040" && ch <= "\u309f")
    && /[\p{L}\p{N}]/u.test(ch);
}

function splitQuery(query) {
  const text = query.toLowerCase();
  const chars = Array.from(text);
  const out = [];
  let run = "";
  let i = 0;
  while (i < chars.length) {
    const rest = chars.slice(i).join("");
    let word = COURSE_WORDS.find((w) => rest.startsWith(w));
    // 「KVキャッシュ」のように空白を省いた用語も、その用語（kv キャッシュ）として
    const squeezed = word === undefined && COURSE_WORDS.find((w) => w.includes(" ") && rest.startsWith(w.replace(/ /g, "")));
    if (squeezed) {
      if (run) { out.push(run); run = ""; }
      out.push(squeezed);
      i += Array.from(squeezed.replace(/ /g, "")).length;
      continue;
    }
    if (word === undefined) {
      COURSE_ASCII.lastIndex = 0;
      const m = COURSE_ASCII.exec(rest);
      if (m) word = m[0];
    }
    if (word !== undefined) {
      if (run) { out.push(run); run = ""; }
      out.push(word);
      i += Array.from(word).length;
      continue;
    }
    if (courseIsRunChar(chars[i])) run += chars[i];
    else if (run) { out.push(run); run = ""; }
    i += 1;
  }
  if (run) out.push(run);
  return out.length ? out : text.split(/\s+/).filter((t) => t);
}
