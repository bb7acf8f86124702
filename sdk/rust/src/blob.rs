//! A small binary encoding for state blobs (`export_state` / `import_state`): little-endian
//! integers and length-prefixed bytes, after a magic tag that names the format and version.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Writes a blob.
#[derive(Debug, Default, Clone)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// A blob that starts with `magic` (e.g. `b"wasp-counter/1"`).
    pub fn new(magic: &[u8]) -> Writer {
        let mut w = Writer(Vec::new());
        w.bytes(magic);
        w
    }

    /// Appends a u8.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    /// Appends a u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends bytes with a u32 length before them.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }

    /// The blob.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads a blob; every read fails with a message instead of panicking on a short blob.
#[derive(Debug, Clone)]
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// Reads `blob`, which must start with `magic`.
    pub fn new(blob: &'a [u8], magic: &[u8]) -> Result<Reader<'a>, String> {
        let mut r = Reader(blob);
        match r.bytes() {
            Ok(m) if m == magic => Ok(r),
            _ => Err("state blob of another format".to_string()),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("state blob cut short".to_string());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    /// Reads a u8.
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    /// Reads a u32.
    pub fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a u64.
    pub fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads length-prefixed bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let mut w = Writer::new(b"t/1");
        w.u8(7).u32(0x0102_0304).u64(u64::MAX).bytes(b"abc");
        let blob = w.finish();
        let mut r = Reader::new(&blob, b"t/1").unwrap();
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u32(), Ok(0x0102_0304));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.bytes(), Ok(&b"abc"[..]));
        assert!(r.is_empty());
        assert_eq!(r.u8(), Err("state blob cut short".into()));
        assert_eq!(
            Reader::new(&blob, b"t/2").unwrap_err(),
            "state blob of another format"
        );
        assert!(Reader::new(&blob[..2], b"t/1").is_err());
        let mut r = Reader::new(&blob[..blob.len() - 1], b"t/1").unwrap();
        r.u8().unwrap();
        r.u32().unwrap();
        r.u64().unwrap();
        assert!(r.bytes().is_err());
    }
}
