// Markdown to safe HTML: marked (GFM), code highlighted by highlight.js, $math$ by KaTeX, all
// sanitised by DOMPurify (model output is untrusted).
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";
import { Marked } from "marked";
import { markedHighlight } from "marked-highlight";
import markedKatex from "marked-katex-extension";

const marked = new Marked(
  markedHighlight({
    emptyLangClass: "hljs",
    langPrefix: "hljs language-",
    highlight(code, lang) {
      const language = hljs.getLanguage(lang) ? lang : "plaintext";
      return hljs.highlight(code, { language }).value;
    },
  }),
  { gfm: true, breaks: true },
);
marked.use(markedKatex({ throwOnError: false, nonStandard: true }));

export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text || ""));
}
