// The empty conversation: what the page does and, while the sample knowledge base is searched, a
// question about it that one click asks. Only the sample gets one: of any other base the page
// knows nothing to suggest.

import { element } from "./dom.js";

// `ragline serve --sample` indexes the bundled manual as the knowledge base "sample", tagged
// "sample" (ragline/ingestion/sample.py). This is the README's question, the one the server's
// warm-up asks it (ragline/commands/serve.py WARM_UP_QUESTION; tests/browser keeps them equal).
export const SAMPLE_QUESTION = "How long does pairing the Aurora sensor take?";

export function isSample(kb) {
  return kb.name === "sample" && Array.isArray(kb.tags) && kb.tags.includes("sample");
}

export class Welcome {
  /**
   * @param {HTMLElement} section the welcome section, holding a #suggestions box
   * @param {{onAsk: (question: string) => void}} hooks
   */
  constructor(section, { onAsk }) {
    this.section = section;
    this.box = section.querySelector("#suggestions");
    this.onAsk = onAsk;
  }

  /** Offer the sample's question while the sample is among the knowledge bases a question searches. */
  update(searchedBases) {
    const offered = searchedBases.some(isSample);
    this.box.hidden = !offered;
    if (!offered) {
      this.box.replaceChildren();
      return;
    }
    const button = element("button", "suggestion", SAMPLE_QUESTION);
    button.type = "button";
    button.addEventListener("click", () => this.onAsk(SAMPLE_QUESTION));
    this.box.replaceChildren(element("p", "hint", "Try it on the sample manual (a fictional weather station):"), button);
  }
}
