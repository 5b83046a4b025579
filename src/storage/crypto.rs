//! Encryption at rest: every stored value of an agent (document record, queue, vectors)
//! sealed with AES-256-GCM, whatever the backend. Pure logic (formats, associated data,
//! the key record, the migration state machine); the cipher itself is behind [`Aead`] and
//! [`CryptoProvider`] (WebCrypto in `src/wasm/crypto.rs`, the `aes-gcm` crate in the
//! native tests).
//!
//! * A random 256-bit **data key** (DEK) seals the values. The user's key (**KEK**: a
//!   `CryptoKey`, or PBKDF2-SHA256 of a passphrase, [`PBKDF2_ITERATIONS`] iterations, a
//!   random 16-byte salt stored in the clear) wraps the DEK in the **key record**, its own
//!   slot ([`Slot::Key`]), plain JSON:
//!   `{"encryption":1,"kdf":"pbkdf2-sha256","iterations":600000,"salt":"…","dek":"…","state":"ready"}`
//!   (`kdf` `"key"` for a `CryptoKey`, without `iterations`/`salt`). The wrapped DEK is
//!   AES-GCM sealed by the KEK: its tag is the key check (a wrong key or passphrase fails to
//!   unwrap it, `DECRYPT_FAILED`, and nothing is written).
//! * A stored value is `umenc1:` + base64(IV ‖ ciphertext ‖ tag), a fresh 96-bit IV per
//!   write, the associated data `user-memory|<agent>|<slot>`: a value moved to another slot
//!   or agent fails to open, like a tampered one (`CORRUPT_MEMORY` naming the slot).
//! * Key rotation re-wraps the DEK: one write of the key record. Encrypting plain memory
//!   in place writes the key record first with `"state":"migrating"`, re-writes each slot
//!   by its own atomic commit, and flips the state last; an interrupted run is finished by
//!   the next [`encrypt`] or [`open`] (while migrating, a plain value is still accepted).

use crate::base::base64::{base64_decode, base64_encode};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::json::{ObjectWriter, Value};
use crate::storage::{Commit, Slot, Store, Versioned};
use std::cell::Cell;
use std::rc::Rc;

/// The tag that starts every encrypted value.
pub const PREFIX: &str = "umenc1:";
/// PBKDF2-SHA256 iterations for a passphrase (OWASP's 2023 figure for PBKDF2-HMAC-SHA256).
pub const PBKDF2_ITERATIONS: u32 = 600_000;
/// Version of the key record format.
const FORMAT: u64 = 1;

/// AES-256-GCM under one key.
pub trait Aead {
    /// Seals `plain`: ciphertext ‖ 16-byte tag.
    fn seal<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], plain: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>>;
    /// Opens what [`Aead::seal`] made; `None` when it fails to authenticate (wrong key,
    /// tampered, other associated data).
    fn open<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], sealed: &'a [u8]) -> LocalFuture<'a, Result<Option<Vec<u8>>>>;
}

/// What the platform provides: randomness, key import and PBKDF2.
pub trait CryptoProvider {
    /// Fills `buf` with cryptographically secure random bytes.
    fn random(&self, buf: &mut [u8]) -> Result<()>;
    /// An AES-256-GCM key from 32 raw bytes (the DEK).
    fn import<'a>(&'a self, raw: &'a [u8]) -> LocalFuture<'a, Result<Rc<dyn Aead>>>;
    /// The AES-256-GCM key PBKDF2-SHA256 derives from `passphrase` and `salt`.
    fn derive<'a>(&'a self, passphrase: &'a str, salt: &'a [u8], iterations: u32) -> LocalFuture<'a, Result<Rc<dyn Aead>>>;
}

/// The user's key: never stored, never printed.
#[derive(Clone)]
pub enum UserKey {
    /// An AES-GCM key of the application (a `CryptoKey`).
    Key(Rc<dyn Aead>),
    /// A passphrase, stretched with PBKDF2; `salt` for a new key record (random if `None`).
    Passphrase {
        /// The passphrase.
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

/// The key record (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// `None` for a `CryptoKey`, else the PBKDF2 iterations and salt.
    pub kdf: Option<(u32, Vec<u8>)>,
    /// IV ‖ the DEK sealed by the KEK.
    pub dek: Vec<u8>,
    /// Whether plain memory is being encrypted in place.
    pub migrating: bool,
}

impl KeyRecord {
    /// Reads a stored key record.
    pub fn parse(text: &str) -> Result<KeyRecord> {
        let bad = |why: &str| Error::corrupt(format!("the stored encryption key record is unreadable: {why}"));
        let v = Value::parse(text).map_err(|_| bad("not JSON"))?;
        if v.get("encryption").and_then(Value::as_u64) != Some(FORMAT) {
            return Err(bad("an unknown format version (written by a newer version of user-memory?)"));
        }
        let b64 = |key: &str| {
            let mut out = Vec::new();
            v.get(key).and_then(Value::as_str).filter(|s| base64_decode(s, &mut out)).map(|_| out)
        };
        let kdf = match v.get("kdf").and_then(Value::as_str) {
            Some("key") => None,
            Some("pbkdf2-sha256") => {
                let iterations = v.get("iterations").and_then(Value::as_u64).filter(|&n| (1..=u32::MAX as u64).contains(&n));
                Some((iterations.ok_or_else(|| bad("no iteration count"))? as u32, b64("salt").ok_or_else(|| bad("no salt"))?))
            }
            _ => return Err(bad("an unknown key derivation")),
        };
        let dek = b64("dek").filter(|d| d.len() > 12).ok_or_else(|| bad("no wrapped data key"))?;
        Ok(KeyRecord { kdf, dek, migrating: v.get("state").and_then(Value::as_str) == Some("migrating") })
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
        o.str("dek", &b64).str("state", if self.migrating { "migrating" } else { "ready" });
        o.finish();
        out
    }
}

fn aad(agent: &str, what: &str) -> Vec<u8> {
    format!("user-memory|{agent}|{what}").into_bytes()
}

fn iv(provider: &dyn CryptoProvider) -> Result<[u8; 12]> {
    let mut iv = [0u8; 12];
    provider.random(&mut iv)?;
    Ok(iv)
}

/// The KEK of `key` for `record` (its salt and iterations), or for a new record.
async fn kek(provider: &dyn CryptoProvider, key: &UserKey, record: Option<&KeyRecord>) -> Result<(Rc<dyn Aead>, Option<(u32, Vec<u8>)>)> {
    match (key, record.map(|r| &r.kdf)) {
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

/// Wraps `dek_raw` under `key` into a new key record.
async fn wrap(provider: &dyn CryptoProvider, key: &UserKey, agent: &str, dek_raw: &[u8], migrating: bool) -> Result<KeyRecord> {
    let (kek, kdf) = kek(provider, key, None).await?;
    let iv = iv(provider)?;
    let mut dek = iv.to_vec();
    dek.extend(kek.seal(&iv, &aad(agent, "key"), dek_raw).await?);
    Ok(KeyRecord { kdf, dek, migrating })
}

/// The raw DEK of `record`; `DECRYPT_FAILED` for a wrong key or passphrase.
async fn unwrap(provider: &dyn CryptoProvider, key: &UserKey, agent: &str, record: &KeyRecord) -> Result<Vec<u8>> {
    let (kek, _) = kek(provider, key, Some(record)).await?;
    let iv: [u8; 12] = record.dek[..12].try_into().unwrap_or_default();
    kek.open(&iv, &aad(agent, "key"), &record.dek[12..]).await?.ok_or_else(|| {
        Error::DecryptFailed(format!("the key or passphrase does not open the memory of agent \"{agent}\"; nothing was changed"))
    })
}

/// A [`Store`] whose values are sealed under the DEK (see the module docs).
pub struct EncryptedStore {
    inner: Rc<dyn Store>,
    provider: Rc<dyn CryptoProvider>,
    dek: Rc<dyn Aead>,
    agent: String,
    /// While migrating: a plain value is read as it is (it is re-written sealed).
    accept_plain: Cell<bool>,
}

impl EncryptedStore {
    async fn seal(&self, slot: Slot, plain: &str) -> Result<String> {
        let iv = iv(&*self.provider)?;
        let mut bytes = iv.to_vec();
        bytes.extend(self.dek.seal(&iv, &aad(&self.agent, slot.name()), plain.as_bytes()).await?);
        let mut out = String::from(PREFIX);
        base64_encode(&bytes, &mut out);
        Ok(out)
    }

    async fn open_value(&self, slot: Slot, v: Versioned) -> Result<Versioned> {
        let Some(body) = v.value.strip_prefix(PREFIX) else {
            if self.accept_plain.get() {
                return Ok(v);
            }
            return Err(Error::corrupt(format!(
                "the stored {} of agent \"{}\" is not encrypted although this memory is: refusing to read it (written by an instance without `encryption`?)",
                slot.name(),
                self.agent
            )));
        };
        let corrupt = || {
            Error::corrupt(format!(
                "the stored {} of agent \"{}\" fails to decrypt: it was altered, or moved from another slot or agent",
                slot.name(),
                self.agent
            ))
        };
        let mut bytes = Vec::new();
        if !base64_decode(body, &mut bytes) || bytes.len() < 28 {
            return Err(corrupt());
        }
        let iv: [u8; 12] = bytes[..12].try_into().unwrap_or_default();
        let plain = self.dek.open(&iv, &aad(&self.agent, slot.name()), &bytes[12..]).await?.ok_or_else(corrupt)?;
        Ok(Versioned { revision: v.revision, value: String::from_utf8(plain).map_err(|_| corrupt())? })
    }

    async fn load_slot(&self, slot: Slot) -> Result<Option<Versioned>> {
        match self.inner.load(slot).await? {
            Some(v) => Ok(Some(self.open_value(slot, v).await?)),
            None => Ok(None),
        }
    }

    async fn commit_slot(&self, slot: Slot, base: u64, value: String) -> Result<Commit> {
        let sealed = self.seal(slot, &value).await?;
        self.inner.commit(slot, base, sealed).await
    }

    /// Re-writes every plain value sealed, each slot by its own commit, then flips the key
    /// record to ready (the last step of encrypting in place).
    async fn finish_migration(&self, mut record: KeyRecord, mut key_revision: u64) -> Result<()> {
        for slot in Slot::DATA {
            loop {
                let Some(v) = self.inner.load(slot).await? else { break };
                if v.value.starts_with(PREFIX) {
                    break;
                }
                if let Commit::Committed(_) = self.commit_slot(slot, v.revision, v.value).await? {
                    break;
                }
            }
        }
        record.migrating = false;
        loop {
            if let Commit::Committed(_) = self.inner.commit(Slot::Key, key_revision, record.to_json()).await? {
                break;
            }
            // Another instance finished first or rotated the key: nothing left to flip.
            match self.inner.load(Slot::Key).await? {
                Some(v) if KeyRecord::parse(&v.value)?.migrating => key_revision = v.revision,
                _ => break,
            }
        }
        self.accept_plain.set(false);
        // The plain versions the re-writes replaced are deleted by each commit; one left by a
        // crash between a pointer flip and that delete is an orphan, removed here (on stores
        // that can list their keys).
        let _ = self.inner.cleanup().await;
        Ok(())
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
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Whether any data slot holds a plain (unencrypted) value.
async fn has_plain(store: &dyn Store) -> Result<bool> {
    for slot in Slot::DATA {
        if let Some(v) = store.load(slot).await? {
            if !v.value.starts_with(PREFIX) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Opens the memory in `inner` with `key`: an empty memory gets a new key record; plain
/// memory is refused (`INVALID_INPUT`: encrypt it with [`encrypt`] first); an interrupted
/// encryption in place is finished; a wrong key is `DECRYPT_FAILED` with nothing written.
pub async fn open(inner: Rc<dyn Store>, agent: &str, provider: Rc<dyn CryptoProvider>, key: &UserKey) -> Result<EncryptedStore> {
    loop {
        let (record, revision) = match inner.load(Slot::Key).await? {
            Some(v) => (KeyRecord::parse(&v.value)?, v.revision),
            None => {
                if has_plain(&*inner).await? {
                    return Err(Error::invalid(format!(
                        "the memory of agent \"{agent}\" in {} is stored unencrypted: encrypt it in place with UserMemory.encrypt() first (nothing was changed)",
                        inner.describe()
                    )));
                }
                let mut raw = [0u8; 32];
                provider.random(&mut raw)?;
                let record = wrap(&*provider, key, agent, &raw, false).await?;
                if inner.commit(Slot::Key, 0, record.to_json()).await? == Commit::Conflict {
                    continue; // another instance created it first: use theirs
                }
                let dek = provider.import(&raw).await?;
                return Ok(EncryptedStore { inner, provider, dek, agent: agent.into(), accept_plain: Cell::new(false) });
            }
        };
        let raw = unwrap(&*provider, key, agent, &record).await?;
        let dek = provider.import(&raw).await?;
        let migrating = record.migrating;
        let store = EncryptedStore { inner, provider, dek, agent: agent.into(), accept_plain: Cell::new(migrating) };
        if migrating {
            store.finish_migration(record, revision).await?;
        }
        return Ok(store);
    }
}

/// Refuses encrypted memory opened without `encryption` (`DECRYPT_FAILED`), so that it is
/// never read as garbage nor overwritten with plaintext.
pub async fn refuse_encrypted(store: &dyn Store, agent: &str) -> Result<()> {
    match store.load(Slot::Key).await? {
        Some(_) => Err(Error::DecryptFailed(format!(
            "the memory of agent \"{agent}\" in {} is encrypted: open it with the `encryption` option",
            store.describe()
        ))),
        None => Ok(()),
    }
}

/// Encrypts plain memory in place with `key` (crash-safe and resumable, see the module
/// docs), or finishes an interrupted run; with `new_key`, then re-wraps the data key under
/// it (key rotation: one write). Memory already encrypted with `key` and no `new_key` is
/// left as it is.
pub async fn encrypt(
    inner: Rc<dyn Store>,
    agent: &str,
    provider: Rc<dyn CryptoProvider>,
    key: &UserKey,
    new_key: Option<&UserKey>,
) -> Result<()> {
    if inner.load(Slot::Key).await?.is_none() {
        let mut raw = [0u8; 32];
        provider.random(&mut raw)?;
        let record = wrap(&*provider, key, agent, &raw, true).await?;
        // A conflict: another run wrote the record first; `open` below uses theirs.
        inner.commit(Slot::Key, 0, record.to_json()).await?;
    }
    let store = open(inner.clone(), agent, provider.clone(), key).await?;
    let Some(new_key) = new_key else { return Ok(()) };
    loop {
        let v = inner.load(Slot::Key).await?.ok_or_else(|| Error::corrupt("the encryption key record disappeared"))?;
        let record = KeyRecord::parse(&v.value)?;
        let raw = unwrap(&*provider, key, agent, &record).await?;
        let rotated = wrap(&*provider, new_key, agent, &raw, false).await?;
        if let Commit::Committed(_) = inner.commit(Slot::Key, v.revision, rotated.to_json()).await? {
            drop(store);
            return Ok(());
        }
    }
}
