// One message of the history: Markdown, image thumbnails, status, the cache figures, citations,
// and its actions (copy; edit into a new branch for user messages; regenerate the last reply).
// A document turn's user message shows the user's own words (`question`), its retrieved sources
// folded under them; its content, as the model saw it, starts with those sources.
import { useEffect, useMemo, useState } from "preact/hooks";
import { auth, routing, withModel } from "../api.js";
import { html } from "../html.js";
import { renderMarkdown } from "../markdown.js";
import { busy, editAsBranch, regenerate, showError } from "../state.js";
import { CacheBar } from "./CacheBar.js";
import { Citations } from "./Citations.js";
import { Sources } from "./Sources.js";
import { Thought } from "./Thought.js";
import { ToolCalls, ToolResultOf } from "./ToolCalls.js";

// What the user wrote: a document turn's own words, else the text of the content.
const wordsOf = (message) => message.question ?? textOf(message.content);
const WHO = { user: "You", tool: "Tool result" };
const SAID = { user: "You said", tool: "Tool result" };

export function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

function images(content) {
  if (!Array.isArray(content)) return [];
  return content.flatMap((p) => {
    if (p.type === "image_file") return [withModel(`v1/media/${p.image_file.file_id}/content`, routing.model())];
    if (p.type === "image_url") return [p.image_url.url];
    return [];
  });
}

// An uploaded image; with an API key it is fetched with the key (an <img src> cannot send one).
function MediaImage({ src }) {
  const [url, setUrl] = useState(auth.key() && src.startsWith("v1/") ? null : src);
  useEffect(() => {
    if (url) return undefined;
    let object = null;
    fetch(src, { headers: auth.headers() })
      .then((r) => (r.ok ? r.blob() : Promise.reject(new Error(r.statusText))))
      .then((blob) => setUrl((object = URL.createObjectURL(blob))))
      .catch(() => {});
    return () => object && URL.revokeObjectURL(object);
  }, [src]);
  return url ? html`<img class="thumb" src=${url} alt="attached image" />` : html`<span class="thumb"></span>`;
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const t = document.createElement("textarea");
    t.value = text;
    document.body.appendChild(t);
    t.select();
    document.execCommand("copy");
    t.remove();
  }
}

function Markdown({ text }) {
  const out = useMemo(() => renderMarkdown(text), [text]);
  return html`<div class="markdown" dangerouslySetInnerHTML=${{ __html: out }}></div>`;
}

function Editor({ message, givenUp, onDone }) {
  const [text, setText] = useState(wordsOf(message));
  const submit = async (e) => {
    e.preventDefault();
    onDone();
    await editAsBranch(message, text).catch(showError);
  };
  return html`<form class="editor" onSubmit=${submit}>
    <textarea aria-label="Edited message" value=${text} onInput=${(e) => setText(e.target.value)}
      onKeyDown=${(e) => e.key === "Escape" && onDone()} autofocus></textarea>
    <p class="note" role="note">
      Sending starts a new branch from here: the cache of <strong>${givenUp}</strong> tokens after
      this point is given up (the conversation before it stays cached).
    </p>
    <div class="row">
      <button type="submit" class="primary" disabled=${busy.value || !text.trim()}>Send as new branch</button>
      <button type="button" onClick=${onDone}>Cancel</button>
    </div>
  </form>`;
}

export function Message({ message, isLastReply, givenUp, prefillRate, streaming, loading }) {
  const [editing, setEditing] = useState(false);
  const role = message.role;
  const text = role === "user" ? wordsOf(message) : textOf(message.content);
  const failed = message.status === "error";
  const classes = `message ${role}${failed ? " failed" : ""}${streaming ? " streaming" : ""}`;
  return html`<article class=${classes} data-id=${message.id} data-status=${message.status || (streaming ? "streaming" : "")}
      aria-label=${SAID[role] || "Assistant said"}>
    <div class="who">${WHO[role] || "Assistant"}</div>
    ${role === "tool" && html`<${ToolResultOf} callId=${message.tool_call_id} />`}
    ${images(message.content).length > 0 &&
    html`<div class="thumbs">${images(message.content).map((src) => html`<${MediaImage} key=${src} src=${src} />`)}</div>`}
    ${role === "assistant" && html`<${Thought} text=${message.reasoning_content} streaming=${streaming} answered=${!!text} />`}
    ${editing
      ? html`<${Editor} message=${message} givenUp=${givenUp} onDone=${() => setEditing(false)} />`
      : role === "user" || role === "tool"
        ? html`<div class="plain">${text}</div><${Sources} citations=${role === "user" ? message.citations : null} />`
        : html`<${Markdown} text=${text} />`}
    <${ToolCalls} calls=${message.tool_calls} />
    ${streaming && role === "assistant" && !text && !message.reasoning_content &&
      (loading
        ? html`<div class="typing loading-model">Loading model ${loading}…</div>`
        : html`<div class="typing" aria-label="waiting for the reply">…</div>`)}
    ${failed && html`<div class="error" role="alert">Error: ${message.error || "the reply failed"}</div>`}
    ${message.status === "cancelled" && html`<div class="tag">stopped</div>`}
    ${role === "assistant" && html`<${Citations} citations=${message.citations || message.rag?.citations} />`}
    ${role === "assistant" && !streaming && html`<${CacheBar} message=${message} prefillRate=${prefillRate} />`}
    ${!streaming && !editing &&
    html`<div class="actions">
      <button class="link" onClick=${() => copy(text)}>Copy</button>
      ${role === "user" && html`<button class="link" disabled=${busy.value} onClick=${() => setEditing(true)}>Edit</button>`}
      ${isLastReply && html`<button class="link" disabled=${busy.value} onClick=${() => regenerate().catch(showError)}>Regenerate</button>`}
    </div>`}
  </article>`;
}
