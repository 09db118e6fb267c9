// SPDX-License-Identifier: GPL-2.0
//! A `gimli::Reader` over reference-counted bytes, so that the DWARF context of a file
//! owns its sections: the file is read once into memory (with a bound) and neither kept
//! mapped nor opened again by path. gimli's own `EndianRcSlice` is the same thing, but it
//! sits behind gimli's `endian-reader` feature, which addr2line does not turn on.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;

use addr2line::gimli::{Error, Reader, ReaderOffsetId, Result, RunTimeEndian};

/// The bytes `start..end` of `buf`.
#[derive(Clone)]
pub struct RcReader {
    buf: Rc<[u8]>,
    start: usize,
    end: usize,
    endian: RunTimeEndian,
}

impl fmt::Debug for RcReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RcReader({}..{} of {}, {:?})",
            self.start,
            self.end,
            self.buf.len(),
            self.endian
        )
    }
}

impl RcReader {
    pub fn new(buf: Rc<[u8]>, endian: RunTimeEndian) -> Self {
        let end = buf.len();
        RcReader {
            buf,
            start: 0,
            end,
            endian,
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    fn eof(&self) -> Error {
        Error::UnexpectedEof(self.offset_id())
    }
}

impl Reader for RcReader {
    type Endian = RunTimeEndian;
    type Offset = usize;

    #[inline]
    fn endian(&self) -> RunTimeEndian {
        self.endian
    }

    #[inline]
    fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline]
    fn read_u8(&mut self) -> Result<u8> {
        match self.buf[..self.end].get(self.start) {
            Some(&b) => {
                self.start += 1;
                Ok(b)
            }
            None => Err(self.eof()),
        }
    }

    #[inline]
    fn empty(&mut self) {
        self.end = self.start;
    }

    #[inline]
    fn truncate(&mut self, len: usize) -> Result<()> {
        if self.len() < len {
            return Err(self.eof());
        }
        self.end = self.start + len;
        Ok(())
    }

    #[inline]
    fn offset_from(&self, base: &Self) -> usize {
        // only meaningful within one buffer (as for gimli's readers); never panics
        self.start.wrapping_sub(base.start)
    }

    #[inline]
    fn offset_id(&self) -> ReaderOffsetId {
        ReaderOffsetId((self.buf.as_ptr() as u64).wrapping_add(self.start as u64))
    }

    #[inline]
    fn lookup_offset_id(&self, id: ReaderOffsetId) -> Option<usize> {
        let base = self.offset_id().0;
        if id.0 >= base && id.0 - base <= self.len() as u64 {
            Some((id.0 - base) as usize)
        } else {
            None
        }
    }

    #[inline]
    fn find(&self, byte: u8) -> Result<usize> {
        self.bytes()
            .iter()
            .position(|&b| b == byte)
            .ok_or_else(|| self.eof())
    }

    #[inline]
    fn skip(&mut self, len: usize) -> Result<()> {
        if self.len() < len {
            return Err(self.eof());
        }
        self.start += len;
        Ok(())
    }

    #[inline]
    fn split(&mut self, len: usize) -> Result<Self> {
        if self.len() < len {
            return Err(self.eof());
        }
        let mut head = self.clone();
        head.end = self.start + len;
        self.start += len;
        Ok(head)
    }

    #[inline]
    fn to_slice(&self) -> Result<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(self.bytes()))
    }

    #[inline]
    fn to_string(&self) -> Result<Cow<'_, str>> {
        std::str::from_utf8(self.bytes())
            .map(Cow::Borrowed)
            .map_err(|_| Error::BadUtf8)
    }

    #[inline]
    fn to_string_lossy(&self) -> Result<Cow<'_, str>> {
        Ok(String::from_utf8_lossy(self.bytes()))
    }

    #[inline]
    fn read_slice(&mut self, buf: &mut [u8]) -> Result<()> {
        let n = buf.len();
        if self.len() < n {
            return Err(self.eof());
        }
        buf.copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_splits_and_bounds() {
        let mut r = RcReader::new(Rc::from(&[1u8, 2, 3, 4, 0, 6][..]), RunTimeEndian::Little);
        let base = r.clone();
        assert_eq!(r.read_u8().unwrap(), 1);
        let mut head = r.split(2).unwrap();
        assert_eq!(head.len(), 2);
        assert_eq!(head.read_u16().unwrap(), 0x0302);
        assert!(head.read_u8().is_err());
        assert_eq!(r.offset_from(&base), 3);
        assert_eq!(r.find(0).unwrap(), 1);
        assert_eq!(base.lookup_offset_id(r.offset_id()), Some(3));
        assert!(r.skip(4).is_err());
        assert!(r.truncate(4).is_err());
        r.truncate(2).unwrap();
        assert_eq!(&*r.to_slice().unwrap(), &[4, 0]);
        assert!(r.split(3).is_err());
        r.empty();
        assert!(r.is_empty());
        let mut buf = [0u8; 1];
        assert!(r.read_slice(&mut buf).is_err());
        let s = RcReader::new(Rc::from(&b"ab\xff"[..]), RunTimeEndian::Big);
        assert!(s.to_string().is_err());
        assert_eq!(s.to_string_lossy().unwrap(), "ab\u{fffd}");
    }
}
