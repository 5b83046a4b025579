//! Encryption at rest: every stored value of an agent (document record, queue, vectors)
//! sealed with AES-256-GCM, whatever the backend. Pure logic (formats, associated data,
//! the key record, the migration and rotation state machines, rollback checks); the cipher
//! itself is behind [`Aead`] and [`CryptoProvider`] (WebCrypto in `src/wasm/crypto.rs`, the
//! `aes-gcm` crate in the native tests).
//!
//! * A random 256-bit **data key** (DEK) seals the values. The user's key (**KEK**: a
//!   `CryptoKey`, or PBKDF2-SHA256 of a passphrase, [`PBKDF2_ITERATIONS`] iterations, a
//!   random 16-byte salt stored in the clear) wraps the DEK in the **key record**, its own
//!   slot ([`Slot::Key`]):
//!   `{"encryption":2,"kdf":"pbkdf2-sha256","iterations":600000,"salt":"…","dek":"…","auth":"…"}`
//!   (`kdf` `"key"` for a `CryptoKey`, without `iterations`/`salt`). The wrapped DEK is
//!   AES-GCM sealed by the KEK, its associated data binding the agent and the KDF fields: its
//!   tag is the key check (a wrong key or passphrase fails to unwrap it, `DECRYPT_FAILED`,
//!   and nothing is written). `iterations` above [`MAX_ITERATIONS`] is refused unread.
//! * `auth` is the record's **authenticated state** ([`KeyBody`]), sealed under the DEK with
//!   the wrapped DEK as associated data: the memory's id, the data key's generation, the
//!   state (ready, migrating, rotating), the SHA-256 of each plain value a migration started
//!   from, the previous data key (sealed under this one) and the document's high-water
//!   revision. A store writer without the key cannot change any of it: an altered record is
//!   `CORRUPT_MEMORY`.
//! * A stored value is `umenc2:<generation>.<revision>:` + base64(IV ‖ ciphertext ‖ tag), a
//!   fresh 96-bit IV per write, the associated data `user-memory|<agent>|<slot>|<generation>|
//!   <revision>`: a value moved to another slot or agent fails to open, like a tampered one
//!   (`CORRUPT_MEMORY` naming the slot); an older value put back under a newer revision, or a
//!   document older than the high-water mark (the key record's, or the highest this process
//!   saw), is `ROLLBACK`.
//! * A **rollback mark** ([`Mark`], optional, [`EncryptedStore::with_mark`]) keeps the
//!   highest document revision outside the store (a file of this device, localStorage beside
//!   IndexedDB), so a process started after the whole store, key record included, was put
//!   back from a backup still sees that it is older: `umark1:<generation>:` + base64(IV ‖
//!   the revision sealed under the DEK), associated data `user-memory|<agent>|mark|<id>|
//!   <generation>`. A missing, unreadable or forged mark counts as none (it never locks the
//!   owner out); a commit re-writes it.
//! * Encrypting plain memory in place writes the key record first (state migrating, with
//!   the hashes of the plain values), re-writes each slot by its own atomic commit, and flips
//!   the state last. An interrupted run is finished by the next [`encrypt`] (which seals
//!   whatever plain value is there: the owner's explicit step) or [`open`] (which seals only
//!   the plain values the migration started from, and refuses any other).
//! * Key rotation makes a new DEK: one write of a key record (state rotating) that wraps it
//!   under the new user key and keeps the old DEK sealed under the new one, then every value
//!   re-sealed under the new DEK (each slot its own commit), then the state flipped. Crash
//!   safe and resumable like the migration: the next [`encrypt`] or [`open`] with the new key
//!   finishes it. The old user key and any old copy of the key record open only what was
//!   written before the rotation.
//! * Every commit first re-reads the key record: an instance opened before a rotation, or
//!   one without `encryption` opened before [`encrypt`] ([`PlainStore`]), refuses to write
//!   rather than write under a stale key or in plaintext.

use crate::base::base64::{base64_decode, base64_encode};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::json::{ObjectWriter, Value};
use crate::storage::{Commit, Slot, Store, Versioned};
use std::cell::RefCell;
use std::rc::Rc;

/// The tag that starts every encrypted value of this format.
pub const PREFIX: &str = "umenc2:";
/// The start of an encrypted value of any format version.
const ANY_PREFIX: &str = "umenc";
/// PBKDF2-SHA256 iterations for a passphrase (OWASP's 2023 figure for PBKDF2-HMAC-SHA256).
pub const PBKDF2_ITERATIONS: u32 = 600_000;
/// The most PBKDF2 iterations a stored key record may ask for (a planted huge count would
/// hang `open()`): 10 million, about 17 times the default.
pub const MAX_ITERATIONS: u32 = 10_000_000;
/// Version of the key record format.
const FORMAT: u64 = 2;
/// The plaintext of a sealed "no value" marker. Encrypted memory leaves no data slot empty:
/// an empty one holds this, sealed, at revision ≥ 1 (and reads as absent), so a writer that
/// checked the key record before it was written or rotated, and then commits a first value
/// (based on revision 0), conflicts instead of landing plaintext or a retired key's value
/// beside the encrypted ones. (No stored document, queue or vector set is a lone NUL.)
const ABSENT: &str = "\0";

/// AES-256-GCM under one key.
pub trait Aead {
    /// Seals `plain`: ciphertext ‖ 16-byte tag.
    fn seal<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], plain: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>>;
    /// Opens what [`Aead::seal`] made; `None` when it fails to authenticate (wrong key,
    /// tampered, other associated data).
    fn open<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], sealed: &'a [u8]) -> LocalFuture<'a, Result<Option<Vec<u8>>>>;
}

/// What the platform provides: randomness, key import, PBKDF2 and SHA-256.
pub trait CryptoProvider {
    /// Fills `buf` with cryptographically secure random bytes.
    fn random(&self, buf: &mut [u8]) -> Result<()>;
    /// An AES-256-GCM key from 32 raw bytes (the DEK).
    fn import<'a>(&'a self, raw: &'a [u8]) -> LocalFuture<'a, Result<Rc<dyn Aead>>>;
    /// The AES-256-GCM key PBKDF2-SHA256 derives from `passphrase` and `salt`.
    fn derive<'a>(&'a self, passphrase: &'a str, salt: &'a [u8], iterations: u32) -> LocalFuture<'a, Result<Rc<dyn Aead>>>;
    /// The SHA-256 digest of `data`.
    fn sha256<'a>(&'a self, data: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>>;
}

/// Where the rollback mark lives: a small string store outside the memory's store (see the
/// module docs). Failures are ignored by the caller (the mark is a second line of defence).
pub trait Mark {
    /// The value stored under `name`, if any.
    fn get<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<String>>>;
    /// Stores `value` under `name`.
    fn set<'a>(&'a self, name: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>>;
    /// Names where the mark is, for messages (never a secret).
    fn describe(&self) -> String;
}

/// The tag that starts a stored rollback mark.
const MARK_PREFIX: &str = "umark1:";

/// The user's key: never stored, never printed.
#[derive(Clone)]
pub enum UserKey {
    /// An AES-GCM key of the application (a `CryptoKey`).
    Key(Rc<dyn Aead>),
    /// A passphrase, stretched with PBKDF2; `salt` for a new key record (random if `None`).
    Passphrase {
        /// The passphrase (well-formed Unicode, NFC-normalised: see [`not_well_formed`]).
        passphrase: String,
        /// The salt of a new key record.
        salt: Option<Vec<u8>>,
    },
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UserKey::Key(_) => "UserKey::Key(…)",
            UserKey::Passphrase { .. } => "UserKey::Passphrase(…)",
        })
    }
}

/// `INVALID_INPUT` for a passphrase that is not well-formed Unicode (a JS string with a lone
/// surrogate code unit), which a lossy conversion would turn into U+FFFD, so that different
/// passphrases would open the same memory. (The check itself is the platform's: a JS string
/// that does not survive a round trip through UTF-8.)
pub fn not_well_formed(what: &str) -> Error {
    Error::invalid(format!("{what}: the passphrase is not well-formed Unicode (it holds a lone surrogate code unit)"))
}

/// The state the key record's authenticated part names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Every value is sealed under the current data key (or the previous one, for a write
    /// that raced a rotation).
    Ready,
    /// Plain memory is being encrypted in place.
    Migrating,
    /// The data key was replaced; values under the previous one are being re-sealed.
    Rotating,
}

impl KeyState {
    fn name(self) -> &'static str {
        match self {
            KeyState::Ready => "ready",
            KeyState::Migrating => "migrating",
            KeyState::Rotating => "rotating",
        }
    }
}

/// The authenticated part of the key record (sealed under the data key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBody {
    /// A random id of this encrypted memory (kept through rotations).
    pub id: String,
    /// The generation of the data key: 1 at creation, +1 per rotation.
    pub generation: u64,
    /// See [`KeyState`].
    pub state: KeyState,
    /// While migrating: the SHA-256 of each plain value the migration started from.
    pub plain: Vec<(Slot, Vec<u8>)>,
    /// IV ‖ the previous data key (generation − 1) sealed under this one.
    pub prev: Option<Vec<u8>>,
    /// The highest document revision committed through this key record (the high-water mark).
    pub doc_revision: u64,
}

impl KeyBody {
    fn to_json(&self) -> String {
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.str("id", &self.id).u64("generation", self.generation).str("state", self.state.name());
        let mut b64 = String::new();
        if !self.plain.is_empty() {
            let mut plain = String::new();
            let mut p = ObjectWriter::new(&mut plain);
            for (slot, hash) in &self.plain {
                b64.clear();
                base64_encode(hash, &mut b64);
                p.str(slot.name(), &b64);
            }
            p.finish();
            o.key("plain").push_str(&plain);
        }
        if let Some(prev) = &self.prev {
            b64.clear();
            base64_encode(prev, &mut b64);
            o.str("prev", &b64);
        }
        o.u64("doc", self.doc_revision);
        o.finish();
        out
    }

    fn parse(text: &[u8]) -> Option<KeyBody> {
        let v = Value::parse(std::str::from_utf8(text).ok()?).ok()?;
        let b64 = |v: &Value| {
            let mut out = Vec::new();
            v.as_str().filter(|s| base64_decode(s, &mut out)).map(|_| out)
        };
        let state = match v.get("state")?.as_str()? {
            "ready" => KeyState::Ready,
            "migrating" => KeyState::Migrating,
            "rotating" => KeyState::Rotating,
            _ => return None,
        };
        let mut plain = Vec::new();
        if let Some(p) = v.get("plain") {
            for (name, hash) in p.as_object()?.iter() {
                plain.push((Slot::from_name(name).filter(|s| *s != Slot::Key)?, b64(hash)?));
            }
        }
        let prev = match v.get("prev") {
            Some(p) => Some(b64(p).filter(|p| p.len() > 12)?),
            None => None,
        };
        Some(KeyBody {
            id: v.get("id")?.as_str()?.to_string(),
            generation: v.get("generation")?.as_u64().filter(|&g| g >= 1)?,
            state,
            plain,
            prev,
            doc_revision: v.get("doc")?.as_u64()?,
        })
    }
}

/// The key record (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// `None` for a `CryptoKey`, else the PBKDF2 iterations and salt.
    pub kdf: Option<(u32, Vec<u8>)>,
    /// IV ‖ the DEK sealed by the KEK.
    pub dek: Vec<u8>,
    /// IV ‖ the [`KeyBody`] sealed by the DEK.
    pub auth: Vec<u8>,
}

impl KeyRecord {
    /// Reads a stored key record (its fields only: the authenticated part needs the key).
    pub fn parse(text: &str) -> Result<KeyRecord> {
        let bad = |why: &str| Error::corrupt(format!("the stored encryption key record is unreadable: {why}"));
        let v = Value::parse(text).map_err(|_| bad("not JSON"))?;
        match v.get("encryption").and_then(Value::as_u64) {
            Some(FORMAT) => {}
            Some(1) => {
                return Err(bad(
                    "it is of format 1, written by a development version of user-memory before the record was authenticated; open it with that version and export it",
                ))
            }
            _ => return Err(bad("an unknown format version (written by a newer version of user-memory?)")),
        }
        let b64 = |key: &str| {
            let mut out = Vec::new();
            v.get(key).and_then(Value::as_str).filter(|s| base64_decode(s, &mut out)).map(|_| out)
        };
        let kdf = match v.get("kdf").and_then(Value::as_str) {
            Some("key") => None,
            Some("pbkdf2-sha256") => {
                let n = v.get("iterations").and_then(Value::as_u64).ok_or_else(|| bad("no iteration count"))?;
                if !(1..=u64::from(MAX_ITERATIONS)).contains(&n) {
                    return Err(bad(&format!("an iteration count of {n}, outside 1–{MAX_ITERATIONS} (it was not run)")));
                }
                Some((n as u32, b64("salt").filter(|s| !s.is_empty()).ok_or_else(|| bad("no salt"))?))
            }
            _ => return Err(bad("an unknown key derivation")),
        };
        let dek = b64("dek").filter(|d| d.len() > 12).ok_or_else(|| bad("no wrapped data key"))?;
        let auth = b64("auth").filter(|d| d.len() > 28).ok_or_else(|| bad("no authenticated state"))?;
        Ok(KeyRecord { kdf, dek, auth })
    }

    /// The stored JSON.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.u64("encryption", FORMAT);
        let mut b64 = String::new();
        match &self.kdf {
            None => {
                o.str("kdf", "key");
            }
            Some((iterations, salt)) => {
                base64_encode(salt, &mut b64);
                o.str("kdf", "pbkdf2-sha256").u64("iterations", u64::from(*iterations)).str("salt", &b64);
            }
        }
        b64.clear();
        base64_encode(&self.dek, &mut b64);
        o.str("dek", &b64);
        b64.clear();
        base64_encode(&self.auth, &mut b64);
        o.str("auth", &b64);
        o.finish();
        out
    }
}

/// The associated data of the wrapped DEK: the agent and the KDF fields.
fn wrap_aad(agent: &str, kdf: &Option<(u32, Vec<u8>)>) -> Vec<u8> {
    let mut out = format!("user-memory|{agent}|key|");
    match kdf {
        None => out.push_str("key"),
        Some((n, salt)) => {
            out.push_str(&format!("pbkdf2-sha256|{n}|"));
            base64_encode(salt, &mut out);
        }
    }
    out.into_bytes()
}

/// The associated data of the authenticated state: the agent and the wrapped DEK.
fn auth_aad(agent: &str, dek: &[u8]) -> Vec<u8> {
    let mut out = format!("user-memory|{agent}|key-record|");
    base64_encode(dek, &mut out);
    out.into_bytes()
}

fn value_aad(agent: &str, slot: Slot, generation: u64, revision: u64) -> Vec<u8> {
    format!("user-memory|{agent}|{}|{generation}|{revision}", slot.name()).into_bytes()
}

fn prev_aad(agent: &str, generation: u64) -> Vec<u8> {
    format!("user-memory|{agent}|prev|{generation}").into_bytes()
}

/// IV ‖ `plain` sealed under `key` with a fresh IV.
async fn seal(provider: &dyn CryptoProvider, key: &dyn Aead, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
    let mut iv = [0u8; 12];
    provider.random(&mut iv)?;
    let mut out = iv.to_vec();
    out.extend(key.seal(&iv, aad, plain).await?);
    Ok(out)
}

/// Opens what [`seal`] made; `None` when it does not authenticate.
async fn unseal(key: &dyn Aead, aad: &[u8], sealed: &[u8]) -> Result<Option<Vec<u8>>> {
    if sealed.len() < 28 {
        return Ok(None);
    }
    let iv: [u8; 12] = sealed[..12].try_into().unwrap_or_default();
    key.open(&iv, aad, &sealed[12..]).await
}

/// The KEK of `key` for the KDF fields `kdf` of a stored record, or for a new record (`None`).
async fn kek(
    provider: &dyn CryptoProvider,
    key: &UserKey,
    kdf: Option<&Option<(u32, Vec<u8>)>>,
) -> Result<(Rc<dyn Aead>, Option<(u32, Vec<u8>)>)> {
    match (key, kdf) {
        (UserKey::Key(k), None | Some(None)) => Ok((k.clone(), None)),
        (UserKey::Passphrase { passphrase, salt }, kdf) => {
            let (iterations, salt) = match kdf {
                Some(Some((n, s))) => (*n, s.clone()),
                _ => match salt {
                    Some(s) => (PBKDF2_ITERATIONS, s.clone()),
                    None => {
                        let mut s = vec![0u8; 16];
                        provider.random(&mut s)?;
                        (PBKDF2_ITERATIONS, s)
                    }
                },
            };
            let k = provider.derive(passphrase, &salt, iterations).await?;
            Ok((k, Some((iterations, salt))))
        }
        (UserKey::Key(_), Some(Some(_))) => {
            Err(Error::DecryptFailed("this memory is encrypted with a passphrase, not a key: pass `encryption: { passphrase }`".into()))
        }
    }
}

/// The keys of an opened key record.
struct Keys {
    record: KeyRecord,
    /// The key slot's revision `record` was read at (or written as).
    revision: u64,
    body: KeyBody,
    raw: Vec<u8>,
    dek: Rc<dyn Aead>,
    prev: Option<Rc<dyn Aead>>,
}

/// A new key record wrapping `raw` (imported as `dek`) under `key`, with `body`.
async fn lock(provider: &dyn CryptoProvider, key: &UserKey, agent: &str, raw: &[u8], dek: &dyn Aead, body: &KeyBody) -> Result<KeyRecord> {
    let (kek, kdf) = kek(provider, key, None).await?;
    let wrapped = seal(provider, &*kek, &wrap_aad(agent, &kdf), raw).await?;
    let auth = seal(provider, dek, &auth_aad(agent, &wrapped), body.to_json().as_bytes()).await?;
    Ok(KeyRecord { kdf, dek: wrapped, auth })
}

fn altered(agent: &str) -> Error {
    Error::corrupt(format!(
        "the encryption key record of agent \"{agent}\" was altered: its authenticated state does not open under its data key; nothing was read or changed"
    ))
}

/// Opens `record` (read at `revision`) with `key`: `DECRYPT_FAILED` for a wrong key,
/// `CORRUPT_MEMORY` for an altered record.
async fn unlock(provider: &dyn CryptoProvider, key: &UserKey, agent: &str, record: KeyRecord, revision: u64) -> Result<Keys> {
    let (kek, _) = kek(provider, key, Some(&record.kdf)).await?;
    let raw = unseal(&*kek, &wrap_aad(agent, &record.kdf), &record.dek).await?.ok_or_else(|| {
        Error::DecryptFailed(format!("the key or passphrase does not open the memory of agent \"{agent}\"; nothing was changed"))
    })?;
    let dek = provider.import(&raw).await?;
    let body =
        unseal(&*dek, &auth_aad(agent, &record.dek), &record.auth).await?.and_then(|b| KeyBody::parse(&b)).ok_or_else(|| altered(agent))?;
    let prev = match &body.prev {
        Some(p) => {
            let raw = unseal(&*dek, &prev_aad(agent, body.generation - 1), p).await?.ok_or_else(|| altered(agent))?;
            Some(provider.import(&raw).await?)
        }
        None => None,
    };
    Ok(Keys { record, revision, body, raw, dek, prev })
}

/// `CORRUPT_MEMORY` for encrypted values without their key record.
fn missing_record(agent: &str, store: &dyn Store) -> Error {
    Error::corrupt(format!(
        "the encryption key record of agent \"{agent}\" in {} is missing, but its memory is encrypted: it cannot be opened without that record. Put the key record back from a backup of this memory; nothing was written",
        store.describe()
    ))
}

/// `DECRYPT_FAILED` for an instance without `encryption` on memory encrypted since it opened.
fn now_encrypted(agent: &str, store: &dyn Store) -> Error {
    Error::DecryptFailed(format!(
        "the memory of agent \"{agent}\" in {} is now encrypted (UserMemory.encrypt() ran after this instance opened it): reopen it with `encryption`; nothing was written",
        store.describe()
    ))
}

fn rotated(agent: &str) -> Error {
    Error::DecryptFailed(format!(
        "the data key of agent \"{agent}\"'s memory was changed (UserMemory.encrypt() with `newEncryption`) after this instance opened it: reopen it with the new `encryption`; nothing was written"
    ))
}

/// The highest document revision this process saw per encrypted memory (`describe|agent|id`).
fn seen(key: &str, update: Option<u64>) -> u64 {
    thread_local! {
        static SEEN: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
    }
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let i = match s.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                s.push((key.to_string(), 0));
                s.len() - 1
            }
        };
        if let Some(r) = update {
            s[i].1 = s[i].1.max(r);
        }
        s[i].1
    })
}

/// A sealed value's clear header: its key generation and the revision it was sealed for.
fn header(value: &str) -> Option<(u64, u64, &str)> {
    let rest = value.strip_prefix(PREFIX)?;
    let (head, body) = rest.split_once(':')?;
    let (g, r) = head.split_once('.')?;
    let num = |s: &str| s.parse::<u64>().ok().filter(|_| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    Some((num(g)?, num(r)?, body))
}

/// A [`Store`] whose values are sealed under the DEK (see the module docs).
pub struct EncryptedStore {
    inner: Rc<dyn Store>,
    provider: Rc<dyn CryptoProvider>,
    agent: String,
    keys: RefCell<Keys>,
    /// The rollback mark, if any, and the highest revision it held or was raised to.
    mark: Option<(Rc<dyn Mark>, std::cell::Cell<u64>)>,
}

impl EncryptedStore {
    /// Keeps the document's high-water revision in `mark` too, outside the store (see the
    /// module docs): the revision it holds now is the floor of every later document read.
    pub async fn with_mark(mut self, mark: Rc<dyn Mark>) -> EncryptedStore {
        let held = self.read_mark(&*mark).await.unwrap_or(0);
        self.mark = Some((mark, std::cell::Cell::new(held)));
        self
    }

    fn mark_name(&self) -> String {
        format!("user-memory-mark/{}/{}", self.agent, self.keys.borrow().body.id)
    }

    fn mark_aad(&self, generation: u64) -> Vec<u8> {
        format!("user-memory|{}|mark|{}|{generation}", self.agent, self.keys.borrow().body.id).into_bytes()
    }

    /// The revision `mark` holds for this memory; `None` when it holds none, or one that does
    /// not open under the current or previous data key (altered, or of another memory).
    // Boxed, like the two below (one copy of each state machine: wasm size).
    fn read_mark<'a>(&'a self, mark: &'a dyn Mark) -> LocalFuture<'a, Option<u64>> {
        Box::pin(self.read_mark_inner(mark))
    }

    async fn read_mark_inner(&self, mark: &dyn Mark) -> Option<u64> {
        let text = mark.get(&self.mark_name()).await.ok()??;
        let (generation, body) = text.strip_prefix(MARK_PREFIX)?.split_once(':')?;
        let generation: u64 = generation.parse().ok()?;
        let key = {
            let k = self.keys.borrow();
            if generation == k.body.generation {
                k.dek.clone()
            } else if generation + 1 == k.body.generation {
                k.prev.clone()?
            } else {
                return None;
            }
        };
        let mut bytes = Vec::new();
        if !base64_decode(body, &mut bytes) {
            return None;
        }
        let plain = unseal(&*key, &self.mark_aad(generation), &bytes).await.ok()??;
        std::str::from_utf8(&plain).ok()?.parse().ok()
    }

    /// Raises the rollback mark to `revision` (best effort: a failure leaves it lower, which
    /// weakens the check but never refuses the owner).
    fn raise_mark(&self, revision: u64) -> LocalFuture<'_, ()> {
        Box::pin(self.raise_mark_inner(revision))
    }

    async fn raise_mark_inner(&self, revision: u64) {
        let Some((mark, held)) = &self.mark else { return };
        if revision <= held.get() {
            return;
        }
        held.set(revision);
        // Another process sharing the mark may have raised it further meanwhile.
        if self.read_mark(&**mark).await.is_some_and(|m| m >= revision) {
            return;
        }
        let (generation, dek) = {
            let k = self.keys.borrow();
            (k.body.generation, k.dek.clone())
        };
        let Ok(sealed) = seal(&*self.provider, &*dek, &self.mark_aad(generation), revision.to_string().as_bytes()).await else {
            return;
        };
        let mut value = format!("{MARK_PREFIX}{generation}:");
        base64_encode(&sealed, &mut value);
        let _ = mark.set(&self.mark_name(), &value).await;
    }

    fn seen_key(&self) -> String {
        format!("{}|{}|{}", self.inner.describe(), self.agent, self.keys.borrow().body.id)
    }

    // Boxed (one copy of its state machine, not one per caller: wasm size).
    fn seal_value<'a>(&'a self, slot: Slot, revision: u64, plain: &'a str) -> LocalFuture<'a, Result<String>> {
        Box::pin(async move {
            let (generation, dek) = {
                let k = self.keys.borrow();
                (k.body.generation, k.dek.clone())
            };
            let bytes = seal(&*self.provider, &*dek, &value_aad(&self.agent, slot, generation, revision), plain.as_bytes()).await?;
            let mut out = format!("{PREFIX}{generation}.{revision}:");
            base64_encode(&bytes, &mut out);
            Ok(out)
        })
    }

    async fn open_value(&self, slot: Slot, v: Versioned) -> Result<Versioned> {
        let name = slot.name();
        let agent = &self.agent;
        if !v.value.starts_with(PREFIX) {
            return Err(Error::corrupt(if v.value.starts_with(ANY_PREFIX) {
                format!("the stored {name} of agent \"{agent}\" is of an unknown encryption format: refusing to read it")
            } else {
                format!(
                    "the stored {name} of agent \"{agent}\" is not encrypted although this memory is: refusing to read it (planted by a store writer, or written by an instance without `encryption`?)"
                )
            }));
        }
        let corrupt = || {
            Error::corrupt(format!(
                "the stored {name} of agent \"{agent}\" fails to decrypt: it was altered, or moved from another slot or agent"
            ))
        };
        let (generation, revision, body) = header(&v.value).ok_or_else(corrupt)?;
        let (current, key) = {
            let k = self.keys.borrow();
            let key = if generation == k.body.generation {
                Some(k.dek.clone())
            } else if generation + 1 == k.body.generation {
                k.prev.clone()
            } else {
                None
            };
            (k.body.generation, key)
        };
        let Some(key) = key else {
            return Err(if generation > current {
                rotated(agent)
            } else {
                Error::corrupt(format!("the stored {name} of agent \"{agent}\" is sealed under a retired data key (generation {generation}): refusing to read it"))
            });
        };
        let mut bytes = Vec::new();
        if !base64_decode(body, &mut bytes) {
            return Err(corrupt());
        }
        let plain = unseal(&*key, &value_aad(agent, slot, generation, revision), &bytes).await?.ok_or_else(corrupt)?;
        if revision != v.revision {
            return Err(if revision < v.revision {
                Error::Rollback(format!(
                    "the stored {name} of agent \"{agent}\" is an older version (revision {revision}) put back as revision {}: a rollback, e.g. a restored backup; it was not read",
                    v.revision
                ))
            } else {
                corrupt()
            });
        }
        if slot == Slot::Document {
            self.check_floor(Some(v.revision))?;
        }
        Ok(Versioned { revision: v.revision, value: String::from_utf8(plain).map_err(|_| corrupt())? })
    }

    /// `ROLLBACK` when the document at `revision` (`None`: absent) is older than the
    /// high-water mark (the key record's, or the highest this process saw); else records it.
    fn check_floor(&self, revision: Option<u64>) -> Result<()> {
        let key = self.seen_key();
        let floor = self.keys.borrow().body.doc_revision.max(seen(&key, None));
        let marked = self.mark.as_ref().map_or(0, |(_, held)| held.get());
        let at = revision.unwrap_or(0);
        if at < floor.max(marked) {
            let mark = match &self.mark {
                Some((mark, _)) if marked > floor => format!(
                    " (the rollback mark in {} says this device saw revision {marked}; to accept this older copy on purpose, delete that mark)",
                    mark.describe()
                ),
                _ => String::new(),
            };
            return Err(Error::Rollback(format!(
                "the stored document of agent \"{}\" in {} is {}, older than revision {} already written: a rollback (a restored backup?); it was not read. Put the newest copy back{mark}",
                self.agent,
                self.inner.describe(),
                if revision.is_some() { format!("at revision {at}") } else { "missing".to_string() },
                floor.max(marked),
            )));
        }
        seen(&key, Some(at));
        Ok(())
    }

    /// The opened value of `slot`, a "no value" marker included (boxed: one copy of
    /// [`EncryptedStore::open_value`]'s state machine for both callers).
    fn opened(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(async move {
            match self.inner.load(slot).await? {
                Some(v) => Ok(Some(self.open_value(slot, v).await?)),
                None => Ok(None),
            }
        })
    }

    async fn load_slot(&self, slot: Slot) -> Result<Option<Versioned>> {
        match self.opened(slot).await? {
            Some(v) => {
                if slot == Slot::Document {
                    self.raise_mark(v.revision).await;
                }
                Ok(Some(v).filter(|v| v.value != ABSENT))
            }
            None => {
                if slot == Slot::Document {
                    self.check_floor(None)?;
                }
                Ok(None)
            }
        }
    }

    /// Re-reads the key record; refuses (nothing written) when it is gone, altered or
    /// rotated since this instance read it.
    async fn check_key(&self) -> Result<()> {
        let v = self.inner.load(Slot::Key).await?.ok_or_else(|| missing_record(&self.agent, &*self.inner))?;
        let (revision, wrapped, dek, generation, id) = {
            let k = self.keys.borrow();
            (k.revision, k.record.dek.clone(), k.dek.clone(), k.body.generation, k.body.id.clone())
        };
        if v.revision == revision {
            return Ok(());
        }
        let record = KeyRecord::parse(&v.value)?;
        let Some(body) = unseal(&*dek, &auth_aad(&self.agent, &record.dek), &record.auth).await?.and_then(|b| KeyBody::parse(&b)) else {
            return Err(if record.dek == wrapped { altered(&self.agent) } else { rotated(&self.agent) });
        };
        if body.generation != generation || body.id != id || record.dek != wrapped {
            return Err(rotated(&self.agent));
        }
        let mut k = self.keys.borrow_mut();
        k.record = record;
        k.revision = v.revision;
        k.body = body;
        Ok(())
    }

    /// The revision of `slot`'s "no value" marker ([`ABSENT`]), or 0 (nothing, or a value: a
    /// commit based on 0 then conflicts, and the writer re-reads it). A value of a newer data
    /// key is `DECRYPT_FAILED` (rotated since this instance opened).
    async fn absent_at(&self, slot: Slot) -> Result<u64> {
        match self.opened(slot).await {
            Ok(Some(v)) if v.value == ABSENT => Ok(v.revision),
            Err(e @ Error::DecryptFailed(_)) => Err(e),
            _ => Ok(0),
        }
    }

    /// Seals the "no value" marker into `slot` if it is empty: `false` when a value was
    /// committed first (the caller re-reads it).
    async fn mark_absent(&self, slot: Slot) -> Result<bool> {
        let sealed = self.seal_value(slot, 1, ABSENT).await?;
        match self.inner.commit(slot, 0, sealed).await? {
            Commit::Committed(n) => {
                if slot == Slot::Document {
                    seen(&self.seen_key(), Some(n));
                }
                Ok(true)
            }
            Commit::Conflict => Ok(false),
        }
    }

    /// Marks every empty data slot (see [`ABSENT`]).
    async fn mark_empty_slots(&self) -> Result<()> {
        for slot in Slot::DATA {
            while self.inner.load(slot).await?.is_none() && !self.mark_absent(slot).await? {}
        }
        Ok(())
    }

    async fn commit_slot(&self, slot: Slot, base: u64, value: String) -> Result<Commit> {
        self.check_key().await?;
        // A first value (base 0, what a load that found nothing names) replaces the slot's
        // "no value" marker: based on the marker's revision, so a value written meanwhile
        // still conflicts.
        let base = if base == 0 { self.absent_at(slot).await? } else { base };
        let sealed = self.seal_value(slot, base + 1, &value).await?;
        let commit = self.inner.commit(slot, base, sealed).await?;
        if let (Slot::Document, Commit::Committed(n)) = (slot, commit) {
            seen(&self.seen_key(), Some(n));
            // The high-water mark in the key record too (best effort: a conflict means
            // another instance just wrote the record; the next commit raises it again).
            let _ = self.write_body(&|b| (b.doc_revision < n).then(|| b.doc_revision = n).is_some(), false).await;
            self.raise_mark(n).await;
        }
        Ok(commit)
    }

    /// Re-writes the authenticated state with `change` applied (it returns whether it
    /// changed anything); on a conflict re-reads the record and, if `retry`, tries again.
    async fn write_body(&self, change: &dyn Fn(&mut KeyBody) -> bool, retry: bool) -> Result<()> {
        loop {
            let (mut record, revision, mut body, dek) = {
                let k = self.keys.borrow();
                (k.record.clone(), k.revision, k.body.clone(), k.dek.clone())
            };
            if !change(&mut body) {
                return Ok(());
            }
            record.auth = seal(&*self.provider, &*dek, &auth_aad(&self.agent, &record.dek), body.to_json().as_bytes()).await?;
            match self.inner.commit(Slot::Key, revision, record.to_json()).await? {
                Commit::Committed(n) => {
                    let mut k = self.keys.borrow_mut();
                    k.record = record;
                    k.revision = n;
                    k.body = body;
                    return Ok(());
                }
                Commit::Conflict => {
                    self.check_key().await?;
                    if !retry {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Seals every plain value, each slot by its own commit, then flips the key record to
    /// ready (the last step of encrypting in place). `owner` (an explicit `encrypt()`) seals
    /// whatever plain value is there; else only the ones the migration started from.
    async fn finish_migration(&self, owner: bool) -> Result<()> {
        let plain = self.keys.borrow().body.plain.clone();
        for slot in Slot::DATA {
            loop {
                let Some(v) = self.inner.load(slot).await? else {
                    if self.mark_absent(slot).await? {
                        break;
                    }
                    continue;
                };
                if v.value.starts_with(ANY_PREFIX) {
                    break;
                }
                if !owner {
                    let hash = self.provider.sha256(v.value.as_bytes()).await?;
                    if !plain.iter().any(|(s, h)| *s == slot && *h == hash) {
                        return Err(Error::corrupt(format!(
                            "the stored {} of agent \"{}\" is plaintext that is not the one encryption started from (planted by a store writer, or written by an instance without `encryption` meanwhile): it was not read. UserMemory.inspect() shows it; UserMemory.encrypt() encrypts it as it is",
                            slot.name(),
                            self.agent
                        )));
                    }
                }
                self.check_key().await?;
                let sealed = self.seal_value(slot, v.revision + 1, &v.value).await?;
                if let Commit::Committed(_) = self.inner.commit(slot, v.revision, sealed).await? {
                    break;
                }
            }
        }
        self.write_body(
            &|b| {
                let change = b.state == KeyState::Migrating;
                if change {
                    b.state = KeyState::Ready;
                    b.plain.clear();
                }
                change
            },
            true,
        )
        .await?;
        // The plain versions the re-writes replaced are deleted by each commit; one left by a
        // crash between a pointer flip and that delete is an orphan, removed here (on stores
        // that can list their keys).
        let _ = self.inner.cleanup().await;
        Ok(())
    }

    /// Re-seals every value of an older data key under the current one, each slot by its own
    /// commit, then flips the key record to ready (the last step of a rotation).
    async fn finish_rotation(&self) -> Result<()> {
        for slot in Slot::DATA {
            loop {
                let Some(v) = self.inner.load(slot).await? else {
                    if self.mark_absent(slot).await? {
                        break;
                    }
                    continue;
                };
                let current = self.keys.borrow().body.generation;
                if header(&v.value).is_some_and(|(g, _, _)| g == current) {
                    break;
                }
                let opened = self.open_value(slot, v).await?;
                if let Commit::Committed(_) = self.commit_slot(slot, opened.revision, opened.value).await? {
                    break;
                }
            }
        }
        self.write_body(
            &|b| {
                let change = b.state == KeyState::Rotating;
                if change {
                    b.state = KeyState::Ready;
                }
                change
            },
            true,
        )
        .await?;
        let _ = self.inner.cleanup().await;
        Ok(())
    }

    /// Replaces the data key (see the module docs): a new one wrapped under `new_key`.
    async fn rotate(&self, new_key: &UserKey) -> Result<()> {
        loop {
            self.check_key().await?;
            let (revision, body, raw) = {
                let k = self.keys.borrow();
                (k.revision, k.body.clone(), k.raw.clone())
            };
            let mut new_raw = vec![0u8; 32];
            self.provider.random(&mut new_raw)?;
            let new_dek = self.provider.import(&new_raw).await?;
            let prev = seal(&*self.provider, &*new_dek, &prev_aad(&self.agent, body.generation), &raw).await?;
            let new_body =
                KeyBody { generation: body.generation + 1, state: KeyState::Rotating, plain: Vec::new(), prev: Some(prev), ..body };
            let record = lock(&*self.provider, new_key, &self.agent, &new_raw, &*new_dek, &new_body).await?;
            if let Commit::Committed(n) = self.inner.commit(Slot::Key, revision, record.to_json()).await? {
                let old = self.keys.borrow().dek.clone();
                *self.keys.borrow_mut() = Keys { record, revision: n, body: new_body, raw: new_raw, dek: new_dek, prev: Some(old) };
                break;
            }
        }
        self.finish_rotation().await
    }
}

impl Store for EncryptedStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(self.load_slot(slot))
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(self.commit_slot(slot, base, value))
    }
    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        self.inner.cleanup()
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            self.check_key().await?;
            self.inner.discard(slot).await?;
            if slot != Slot::Key {
                self.mark_empty_slots().await?;
            }
            Ok(())
        })
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// What the data slots hold.
#[derive(Debug, PartialEq, Eq)]
enum Contents {
    Empty,
    Plain,
    Encrypted,
}

async fn contents(store: &dyn Store) -> Result<Contents> {
    let mut out = Contents::Empty;
    for slot in Slot::DATA {
        if let Some(v) = store.load(slot).await? {
            if v.value.starts_with(ANY_PREFIX) {
                return Ok(Contents::Encrypted);
            }
            out = Contents::Plain;
        }
    }
    Ok(out)
}

/// Opens the memory in `inner` with `key`: an empty memory gets a new key record; plain
/// memory is refused (`INVALID_INPUT`: encrypt it with [`encrypt`] first), and so is
/// encrypted memory without its key record (`CORRUPT_MEMORY`); an interrupted encryption in
/// place or rotation is finished; a wrong key is `DECRYPT_FAILED` with nothing written.
pub async fn open(inner: Rc<dyn Store>, agent: &str, provider: Rc<dyn CryptoProvider>, key: &UserKey) -> Result<EncryptedStore> {
    open_as(inner, agent, provider, key, false).await
}

async fn open_as(
    inner: Rc<dyn Store>,
    agent: &str,
    provider: Rc<dyn CryptoProvider>,
    key: &UserKey,
    owner: bool,
) -> Result<EncryptedStore> {
    loop {
        let keys = match inner.load(Slot::Key).await? {
            Some(v) => unlock(&*provider, key, agent, KeyRecord::parse(&v.value)?, v.revision).await?,
            None => {
                match contents(&*inner).await? {
                    Contents::Encrypted => return Err(missing_record(agent, &*inner)),
                    Contents::Plain => {
                        return Err(Error::invalid(format!(
                            "the memory of agent \"{agent}\" in {} is stored unencrypted: encrypt it in place with UserMemory.encrypt() first (nothing was changed)",
                            inner.describe()
                        )))
                    }
                    Contents::Empty => {}
                }
                let (keys, committed) = create(&*inner, agent, &*provider, key, Vec::new()).await?;
                if !committed {
                    continue; // another instance created it first: use theirs
                }
                let store = EncryptedStore { inner, provider, agent: agent.into(), keys: RefCell::new(keys), mark: None };
                // A plain instance that checked for a key record just before this one was
                // written must not land a first value in the clear.
                store.mark_empty_slots().await?;
                return Ok(store);
            }
        };
        let state = keys.body.state;
        let store = EncryptedStore { inner, provider, agent: agent.into(), keys: RefCell::new(keys), mark: None };
        match state {
            KeyState::Migrating => store.finish_migration(owner).await?,
            KeyState::Rotating => store.finish_rotation().await?,
            KeyState::Ready => {}
        }
        return Ok(store);
    }
}

/// Writes a new key record (a new data key; migrating when `plain` names the hashes of
/// plain values to encrypt) at revision 0; `false` when another one was written first.
async fn create(
    inner: &dyn Store,
    agent: &str,
    provider: &dyn CryptoProvider,
    key: &UserKey,
    plain: Vec<(Slot, Vec<u8>)>,
) -> Result<(Keys, bool)> {
    let mut raw = vec![0u8; 32];
    provider.random(&mut raw)?;
    let dek = provider.import(&raw).await?;
    let mut id_bytes = [0u8; 8];
    provider.random(&mut id_bytes)?;
    let mut id = String::new();
    crate::base::hex::push_hex(&mut id, u64::from_le_bytes(id_bytes), 16);
    let state = if plain.is_empty() { KeyState::Ready } else { KeyState::Migrating };
    let body = KeyBody { id, generation: 1, state, plain, prev: None, doc_revision: 0 };
    let record = lock(provider, key, agent, &raw, &*dek, &body).await?;
    let committed = inner.commit(Slot::Key, 0, record.to_json()).await? != Commit::Conflict;
    Ok((Keys { record, revision: 1, body, raw, dek, prev: None }, committed))
}

/// A plain [`Store`] that stays plain: a commit or discard first checks that no key record
/// appeared ([`encrypt`] ran after it was opened), and an encrypted value is never read as
/// plaintext (nor dropped as unreadable): both refused with `DECRYPT_FAILED`.
pub struct PlainStore {
    inner: Rc<dyn Store>,
    agent: String,
}

impl PlainStore {
    async fn check(&self) -> Result<()> {
        match self.inner.load(Slot::Key).await? {
            Some(_) => Err(now_encrypted(&self.agent, &*self.inner)),
            None => Ok(()),
        }
    }
}

impl Store for PlainStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(async move {
            match self.inner.load(slot).await? {
                Some(v) if v.value.starts_with(ANY_PREFIX) => Err(now_encrypted(&self.agent, &*self.inner)),
                other => Ok(other),
            }
        })
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            self.check().await?;
            self.inner.commit(slot, base, value).await
        })
    }
    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        self.inner.cleanup()
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            self.check().await?;
            self.inner.discard(slot).await
        })
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Opens plain memory without a key: encrypted memory is refused (`DECRYPT_FAILED`; with
/// its key record lost, `CORRUPT_MEMORY` naming it), so that it is never read as garbage
/// nor overwritten with plaintext, now or after a later [`encrypt`] (see [`PlainStore`]).
pub async fn open_plain(inner: Rc<dyn Store>, agent: &str) -> Result<PlainStore> {
    match inner.load(Slot::Key).await? {
        Some(_) => Err(Error::DecryptFailed(format!(
            "the memory of agent \"{agent}\" in {} is encrypted: open it with the `encryption` option",
            inner.describe()
        ))),
        None if contents(&*inner).await? == Contents::Encrypted => Err(missing_record(agent, &*inner)),
        None => Ok(PlainStore { inner, agent: agent.into() }),
    }
}

/// Encrypts plain memory in place with `key` (crash-safe and resumable, see the module
/// docs), or finishes an interrupted run; with `new_key`, then rotates the data key (a new
/// one under `new_key`, every value re-sealed; an interrupted rotation is finished by a run
/// with the same keys, or by `open` with `new_key`). Memory already encrypted with `key` and
/// no `new_key` is left as it is.
pub async fn encrypt(
    inner: Rc<dyn Store>,
    agent: &str,
    provider: Rc<dyn CryptoProvider>,
    key: &UserKey,
    new_key: Option<&UserKey>,
) -> Result<()> {
    if inner.load(Slot::Key).await?.is_none() {
        if contents(&*inner).await? == Contents::Encrypted {
            return Err(missing_record(agent, &*inner));
        }
        let mut plain = Vec::new();
        for slot in Slot::DATA {
            if let Some(v) = inner.load(slot).await? {
                plain.push((slot, provider.sha256(v.value.as_bytes()).await?));
            }
        }
        if !plain.is_empty() {
            // A conflict: another run wrote the record first; `open_as` below uses theirs.
            create(&*inner, agent, &*provider, key, plain).await?;
        }
    }
    let store = match open_as(inner.clone(), agent, provider.clone(), key, true).await {
        Ok(store) => store,
        Err(e @ Error::DecryptFailed(_)) => match new_key {
            // An interrupted rotation to `new_key` (or a finished one): finish it.
            Some(new_key) => return open_as(inner, agent, provider, new_key, true).await.map(drop).map_err(|_| e),
            None => return Err(e),
        },
        Err(e) => return Err(e),
    };
    match new_key {
        Some(new_key) => store.rotate(new_key).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_record_round_trips_and_bounds_its_iterations() {
        let r = KeyRecord { kdf: Some((PBKDF2_ITERATIONS, vec![1; 16])), dek: vec![2; 60], auth: vec![3; 80] };
        assert_eq!(KeyRecord::parse(&r.to_json()).unwrap(), r);
        let huge = r.to_json().replace("600000", &u32::MAX.to_string());
        let e = KeyRecord::parse(&huge).unwrap_err();
        assert!(e.message().contains("4294967295, outside"), "{}", e.message());
        let old = r.to_json().replace("\"encryption\":2", "\"encryption\":1");
        assert!(KeyRecord::parse(&old).unwrap_err().message().contains("format 1"));
    }

    #[test]
    fn the_authenticated_state_round_trips_and_a_value_header_parses_strictly() {
        let b = KeyBody {
            id: "00ff".into(),
            generation: 3,
            state: KeyState::Migrating,
            plain: vec![(Slot::Document, vec![9; 32]), (Slot::Queue, vec![8; 32])],
            prev: Some(vec![7; 44]),
            doc_revision: 12,
        };
        assert_eq!(KeyBody::parse(b.to_json().as_bytes()).unwrap(), b);
        assert_eq!(header("umenc2:3.12:AAAA"), Some((3, 12, "AAAA")));
        for bad in ["umenc2:3:AAAA", "umenc2:+3.1:A", "umenc2:.1:A", "umenc1:AAAA", "umenc2:3.-1:A"] {
            assert_eq!(header(bad), None, "{bad}");
        }
    }
}
