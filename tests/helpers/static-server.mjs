// A static file server on 127.0.0.1 for browser tests and the demo: serves files under
// `root`, with the right MIME types (application/wasm for .wasm, so streaming
// instantiation works). `routes` may add handlers: { "/path": (req, res) => … }.
import { createReadStream, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize, sep } from "node:path";

export const MIME = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ts": "text/plain; charset=utf-8",
};

export function staticHandler(mounts) {
  return (req, res) => {
    const url = new URL(req.url, "http://x");
    let path = decodeURIComponent(url.pathname);
    for (const [prefix, dir] of mounts) {
      if (!path.startsWith(prefix)) continue;
      let rel = path.slice(prefix.length);
      if (rel === "" || rel.endsWith("/")) rel += "index.html";
      const file = normalize(join(dir, rel));
      if (!file.startsWith(normalize(dir) + sep) && file !== normalize(dir)) break;
      if (existsSync(file) && statSync(file).isFile()) {
        res.writeHead(200, {
          "content-type": MIME[extname(file)] ?? "application/octet-stream",
          "cache-control": "no-store",
        });
        createReadStream(file).pipe(res);
        return true;
      }
    }
    return false;
  };
}

/** Serves `mounts` ([[urlPrefix, directory], …]) plus `routes`; resolves to { url, close }. */
export async function startStaticServer(mounts, routes = {}, port = 0) {
  const serveFile = staticHandler(mounts);
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    try {
      if (routes[path]) return await routes[path](req, res);
      if (serveFile(req, res)) return;
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(e?.stack ?? e));
    }
  });
  await new Promise((resolve, reject) => server.listen(port, "127.0.0.1", resolve).on("error", reject));
  const { port: bound } = server.address();
  return {
    url: `http://127.0.0.1:${bound}`,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}
