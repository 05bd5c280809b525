// Images on the page: a picture attached to a question, and the stored images an answer's
// references carry (ImageInfo), shown as thumbnails from GET /api/v1/images/<name>.
//
// A stored image needs the API key, which an <img src> cannot send, and the page's CSP allows
// images only from this origin or `data:` URLs: so a thumbnail is fetched with the key and shown
// as a data: URL. An attached picture is sent as a data: URL inside the JSON question, whose body
// the server caps at 1 MB: a larger picture is scaled down (as JPEG) before it is sent.

import { element } from "./dom.js";

export const ATTACH_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"]; // what a vision model reads
const STORED = /^local:\/\/images\/([0-9a-f]{64}\.(?:png|jpg|webp|gif))$/;
const MAX_ATTACHED_CHARS = 700_000; // the data: URL of one picture, well inside the 1 MB body
const SCALED_SIDE = 1600; // a scaled picture keeps this longest side: enough to read a screenshot
const MAX_THUMBNAILS = 6; // per answer: the references panel lists every passage anyway

/** The image handles of one reference's ImageInfo that the image route serves. */
export function storedImages(reference) {
  const images = reference?.metadata?.images;
  if (!Array.isArray(images)) return [];
  return images.map((image) => ({ url: String(image?.url || ""), caption: String(image?.caption || "") }))
    .filter((image) => STORED.test(image.url));
}

/** Each stored image of an answer's references once, in reference order. */
export function answerImages(references) {
  const seen = new Map();
  references.forEach((reference, index) => {
    for (const image of storedImages(reference)) if (!seen.has(image.url)) seen.set(image.url, { ...image, index });
  });
  return [...seen.values()].slice(0, MAX_THUMBNAILS);
}

function readAsDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** Loads stored images with the API key, each once per page. */
export class ImageLoader {
  constructor(api) {
    this.api = api;
    this.cache = new Map(); // handle -> Promise<data: URL>
  }

  load(handle) {
    const name = STORED.exec(handle)?.[1];
    if (!name) return Promise.reject(new Error("not a stored image"));
    if (!this.cache.has(handle)) {
      const loading = this.api.fetch(`images/${name}`).then((response) => response.blob()).then(readAsDataUrl);
      loading.catch(() => this.cache.delete(handle)); // a failed load may be retried later
      this.cache.set(handle, loading);
    }
    return this.cache.get(handle);
  }

  /** An <img> for a stored image; it stays empty (and says so) when the image cannot be loaded. */
  thumbnail(image, className = "thumb") {
    const img = element("img", className);
    img.alt = image.caption || "An image from the knowledge base";
    img.loading = "lazy";
    this.load(image.url)
      .then((url) => { img.src = url; })
      .catch(() => { img.classList.add("missing"); img.title = "This image could not be loaded."; });
    return img;
  }
}

function loadImage(url) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error("The picture could not be read."));
    img.src = url;
  });
}

/** A picture file as the data: URL a question carries; scaled down when too large to send. */
export async function attachmentUrl(file) {
  if (!ATTACH_TYPES.includes(file.type)) throw new Error(`${file.name} is not a PNG, JPEG, WebP or GIF picture.`);
  const original = await readAsDataUrl(file);
  if (original.length <= MAX_ATTACHED_CHARS) return original;
  const img = await loadImage(original);
  for (const side of [SCALED_SIDE, 1024, 640]) {
    const scale = Math.min(1, side / Math.max(img.naturalWidth, img.naturalHeight));
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(img.naturalWidth * scale));
    canvas.height = Math.max(1, Math.round(img.naturalHeight * scale));
    canvas.getContext("2d").drawImage(img, 0, 0, canvas.width, canvas.height);
    const scaled = canvas.toDataURL("image/jpeg", 0.85);
    if (scaled.length <= MAX_ATTACHED_CHARS) return scaled;
  }
  throw new Error(`${file.name} is too large to send, even scaled down.`);
}

/** The pictures of a question, shown in its bubble (only data: URLs: the CSP shows nothing else). */
export function questionImages(images) {
  const strip = element("div", "question-images");
  for (const image of images || []) {
    const url = typeof image === "string" ? image : image?.url;
    if (!/^data:image\/(png|jpeg|webp|gif);base64,/.test(url || "")) continue;
    const img = element("img", "thumb");
    img.src = url;
    img.alt = image?.caption || "An attached picture";
    if (image?.caption) img.title = image.caption;
    strip.append(img);
  }
  return strip.childElementCount ? strip : null;
}
