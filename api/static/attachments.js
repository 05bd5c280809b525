// The pictures the next question carries: previewed above the composer, each removable.

import { attachmentUrl } from "./images.js";

export class Attachments {
  /**
   * @param {HTMLElement} strip where the previews go
   * @param {HTMLInputElement} input the file picker
   * @param {{onError: (text: string) => void}} hooks
   */
  constructor(strip, input, { onError }) {
    this.strip = strip;
    this.onError = onError;
    this.urls = []; // data: URLs
    input.addEventListener("change", () => this.add(input));
  }

  set(urls) {
    this.urls = urls;
    this.strip.replaceChildren(...urls.map((url, index) => {
      const item = document.createElement("figure");
      item.className = "attachment";
      const img = Object.assign(document.createElement("img"), { className: "thumb", src: url, alt: `Attached picture ${index + 1}` });
      const remove = Object.assign(document.createElement("button"), { type: "button", className: "link", textContent: "Remove" });
      remove.setAttribute("aria-label", `Remove attached picture ${index + 1}`);
      remove.addEventListener("click", () => this.set(this.urls.filter((_, i) => i !== index)));
      item.append(img, remove);
      return item;
    }));
    this.strip.hidden = urls.length === 0;
  }

  async add(input) {
    const files = [...input.files];
    input.value = ""; // the same file may be chosen again after a removal
    for (const file of files) {
      try {
        this.set([...this.urls, await attachmentUrl(file)]);
      } catch (error) {
        this.onError(error.message);
      }
    }
  }
}
