// The message box: Enter sends, Shift+Enter is a new line; images by picker, paste or drop;
// Send is disabled while a reply streams, and Stop cancels it.
import { useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { modelInfo } from "../models.js";
import { attach, attachments, busy, currentModel, live, removeAttachment, send, showError, stop } from "../state.js";

export function Composer() {
  const [text, setText] = useState("");
  const [dragging, setDragging] = useState(false);
  const box = useRef(null);
  const submit = async (e) => {
    e?.preventDefault();
    if (busy.value) return;
    const value = text;
    setText("");
    const sent = await send(value).catch((err) => (showError(err), false));
    if (!sent && value) setText(value);
    box.current?.focus();
  };
  const onKeyDown = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  };
  const onPaste = (e) => {
    const files = [...(e.clipboardData?.files || [])].filter((f) => f.type.startsWith("image/"));
    if (files.length) {
      e.preventDefault();
      attach(files);
    }
  };
  const onDrop = (e) => {
    e.preventDefault();
    setDragging(false);
    attach([...(e.dataTransfer?.files || [])]);
  };
  const stopping = live.value?.status === "stopping";
  // Router mode: a model that takes no images (no projector) says so before an upload.
  const info = modelInfo(currentModel.value);
  const noImages = info && !info.inputs.includes("image");
  return html`<form class=${`composer${dragging ? " dragging" : ""}`} onSubmit=${submit}
      onDragOver=${(e) => (e.preventDefault(), setDragging(true))} onDragLeave=${() => setDragging(false)}
      onDrop=${onDrop}>
    ${attachments.value.length > 0 &&
    html`<ul class="attachments" aria-label="Attached images">
      ${attachments.value.map(
        (a) => html`<li key=${a.key} class=${a.status} data-status=${a.status}>
          <img src=${a.url} alt=${a.name} />
          <span class="status">${a.status === "uploading" ? "uploading…" : a.status === "error" ? a.error : ""}</span>
          <button type="button" class="icon" aria-label=${`Remove ${a.name}`} onClick=${() => removeAttachment(a.key)}>✕</button>
        </li>`,
      )}
    </ul>`}
    <div class="row">
      <label class=${`button${noImages ? " disabled" : ""}`}
        title=${noImages ? `${info.id} takes no images` : "Attach images (or paste, or drop them here)"}>
        Image<span class="sr-only">: attach images</span>
        <input type="file" accept="image/*" multiple hidden disabled=${noImages}
          onChange=${(e) => (attach([...e.target.files]), (e.target.value = ""))} />
      </label>
      <textarea ref=${box} rows="2" aria-label="Message" placeholder="Message (Enter to send, Shift+Enter for a new line)"
        value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKeyDown} onPaste=${onPaste}></textarea>
      ${busy.value
        ? html`<button type="button" class="stop" onClick=${stop} disabled=${stopping}>${stopping ? "Stopping…" : "Stop"}</button>`
        : null}
      <button type="submit" class="primary send" disabled=${busy.value}>Send</button>
    </div>
  </form>`;
}
