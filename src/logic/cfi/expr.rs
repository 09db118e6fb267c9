// SPDX-License-Identifier: GPL-2.0
//! A bounded DWARF expression evaluator, for CFA and register rules.
//!
//! A stack machine of [`MAX_EXPR_STACK`] 64-bit values that executes at most
//! [`MAX_EXPR_OPS`] operations. No branches (`DW_OP_skip`, `DW_OP_bra`) are supported, so an
//! expression runs straight through: it ends. Real unwind information needs little: the
//! binutils `.plt` rule (`breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus`), gcc's
//! stack realignment (`breg6 -8; deref`) and glibc's signal frame (`breg7 N; deref`).

use super::memory::{Leb, UnwindMemory};
use super::regs::Regs;
use super::{unsupported, Error, Invalid, Unsupported, MALFORMED};

/// Deepest stack.
pub const MAX_EXPR_STACK: usize = 16;
/// Most operations executed.
pub const MAX_EXPR_OPS: usize = 64;

/// Operation codes (DWARF 5, 7.7.1).
#[allow(missing_docs)]
pub mod op {
    pub const DEREF: u8 = 0x06;
    pub const CONST1U: u8 = 0x08;
    pub const CONST1S: u8 = 0x09;
    pub const CONST2U: u8 = 0x0a;
    pub const CONST2S: u8 = 0x0b;
    pub const CONST4U: u8 = 0x0c;
    pub const CONST4S: u8 = 0x0d;
    pub const CONST8U: u8 = 0x0e;
    pub const CONST8S: u8 = 0x0f;
    pub const CONSTU: u8 = 0x10;
    pub const CONSTS: u8 = 0x11;
    pub const DUP: u8 = 0x12;
    pub const DROP: u8 = 0x13;
    pub const OVER: u8 = 0x14;
    pub const PICK: u8 = 0x15;
    pub const SWAP: u8 = 0x16;
    pub const ROT: u8 = 0x17;
    pub const ABS: u8 = 0x19;
    pub const AND: u8 = 0x1a;
    pub const MINUS: u8 = 0x1c;
    pub const MUL: u8 = 0x1e;
    pub const NEG: u8 = 0x1f;
    pub const NOT: u8 = 0x20;
    pub const OR: u8 = 0x21;
    pub const PLUS: u8 = 0x22;
    pub const PLUS_UCONST: u8 = 0x23;
    pub const SHL: u8 = 0x24;
    pub const SHR: u8 = 0x25;
    pub const SHRA: u8 = 0x26;
    pub const XOR: u8 = 0x27;
    pub const SKIP: u8 = 0x2f;
    pub const BRA: u8 = 0x28;
    pub const EQ: u8 = 0x29;
    pub const GE: u8 = 0x2a;
    pub const GT: u8 = 0x2b;
    pub const LE: u8 = 0x2c;
    pub const LT: u8 = 0x2d;
    pub const NE: u8 = 0x2e;
    pub const LIT0: u8 = 0x30;
    pub const LIT31: u8 = 0x4f;
    pub const BREG0: u8 = 0x70;
    pub const BREG31: u8 = 0x8f;
    pub const BREGX: u8 = 0x92;
    pub const DEREF_SIZE: u8 = 0x94;
    pub const NOP: u8 = 0x96;
}

/// A cursor over the bytes of an expression.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl Bytes<'_> {
    fn u8(&mut self) -> Result<u8, Error> {
        let (&b, rest) = self.rest.split_first().ok_or(MALFORMED)?;
        self.rest = rest;
        Ok(b)
    }

    fn le<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        let head = self.rest.get(..N).ok_or(MALFORMED)?;
        out.copy_from_slice(head);
        self.rest = self.rest.get(N..).unwrap_or(&[]);
        Ok(out)
    }

    fn leb(&mut self, signed: bool) -> Result<u64, Error> {
        let mut leb = Leb::new();
        for _ in 0..super::memory::MAX_LEB128_BYTES {
            if let Some((v, shift, last)) = leb.push(self.u8()?, signed)? {
                return Ok(if signed {
                    super::memory::sign_extend_leb(v, shift, last) as u64
                } else {
                    v
                });
            }
        }
        Err(MALFORMED)
    }
}

/// The value stack.
///
/// # Invariants
///
/// `len <= MAX_EXPR_STACK`; `values[..len]` are the values, the top last.
struct Stack {
    values: [u64; MAX_EXPR_STACK],
    len: usize,
}

const UNDERFLOW: Error = Error::Invalid(Invalid::Expression);

impl Stack {
    fn push(&mut self, v: u64) -> Result<(), Error> {
        let slot = self
            .values
            .get_mut(self.len)
            .ok_or(unsupported(Unsupported::ExpressionStack))?;
        *slot = v;
        // INVARIANT: the slot existed, so len < MAX_EXPR_STACK.
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Result<u64, Error> {
        let len = self.len.checked_sub(1).ok_or(UNDERFLOW)?;
        let v = *self.values.get(len).ok_or(UNDERFLOW)?;
        self.len = len;
        Ok(v)
    }

    /// The value `depth` below the top (0: the top).
    fn peek(&self, depth: usize) -> Result<u64, Error> {
        let i = self
            .len
            .checked_sub(1)
            .and_then(|top| top.checked_sub(depth))
            .ok_or(UNDERFLOW)?;
        self.values.get(i).copied().ok_or(UNDERFLOW)
    }
}

/// The value of register `reg` for `DW_OP_breg*`.
fn reg_value(regs: &Regs, reg: u64) -> Result<u64, Error> {
    let reg = u16::try_from(reg).map_err(|_| unsupported(Unsupported::Register))?;
    if usize::from(reg) >= super::regs::REG_COUNT {
        return Err(unsupported(Unsupported::Register));
    }
    regs.get(reg)
        .ok_or(Error::Invalid(Invalid::UnknownRegister))
}

/// Evaluates `expr` with the frame's `regs`, reading memory through `mem`; `initial` is
/// pushed first (the CFA, for register rules). Returns the value on top of the stack.
#[inline]
pub fn eval<M: UnwindMemory>(
    expr: &[u8],
    regs: &Regs,
    mem: &mut M,
    initial: Option<u64>,
) -> Result<u64, Error> {
    match eval_breg(expr, regs, mem) {
        Some(value) => value,
        None => eval_machine(expr, regs, mem, initial),
    }
}

/// `bregN offset` or `bregN offset; deref` (`N` below 32, a well-formed offset), computed
/// without the stack machine; `None` for any other expression.
///
/// These are the forms a frame of a stack-realigning function evaluates at every walk
/// through it, several a frame: gcc's DRAP rows give the CFA as `breg6 -8; deref` and each
/// saved register's address as `breg6 -n`; glibc's signal frame gives its registers'
/// addresses as `breg7 n; deref`. The machine pays for its 128-byte stack, an operation
/// loop and a LEB128 reader call on each (about 190 instructions an expression, qprof).
///
/// The answer is the machine's, errors included (host test
/// `short_expressions_evaluate_as_the_machine_does`): an `initial` value would only lie
/// below the result; the register's value and the read are the machine's own steps.
#[inline(always)]
pub fn eval_breg<M: UnwindMemory>(
    expr: &[u8],
    regs: &Regs,
    mem: &mut M,
) -> Option<Result<u64, Error>> {
    let (reg, offset, deref) = parse_breg(expr)?;
    let addr = match reg_value(regs, u64::from(reg)) {
        Ok(base) => base.wrapping_add(offset as u64),
        Err(e) => return Some(Err(e)),
    };
    if !deref {
        return Some(Ok(addr));
    }
    let mut bytes = [0u8; 8];
    Some(if mem.read(addr, &mut bytes) {
        Ok(u64::from_le_bytes(bytes))
    } else {
        Err(Error::Fault)
    })
}

/// The parts `(N, offset, deref)` of `bregN offset` or `bregN offset; deref` (`N` below
/// 32, a well-formed offset); `None` for any other expression. What [`eval_breg`]
/// computes, and what a compact row keeps of gcc's DRAP rows
/// ([`super::compact::CompactRow`]).
#[inline(always)]
pub fn parse_breg(expr: &[u8]) -> Option<(u8, i64, bool)> {
    let (&opcode, mut rest) = expr.split_first()?;
    if !(op::BREG0..=op::BREG31).contains(&opcode) {
        return None;
    }
    let mut leb = Leb::new();
    let mut offset = None;
    for _ in 0..super::memory::MAX_LEB128_BYTES {
        let (&byte, tail) = rest.split_first()?;
        rest = tail;
        if let Some((v, shift, last)) = leb.push(byte, true).ok()? {
            offset = Some(super::memory::sign_extend_leb(v, shift, last));
            break;
        }
    }
    let deref = match rest {
        [] => false,
        [op::DEREF] => true,
        _ => return None,
    };
    Some((opcode - op::BREG0, offset?, deref))
}

/// Longest expression [`encode_breg`] writes: the operation, a 64-bit SLEB128 offset, and
/// `deref`.
pub const BREG_EXPR_MAX: usize = 2 + super::memory::MAX_LEB128_BYTES;

/// Writes `bregN offset` (and `deref` if `deref`) into `out` (`N` is `reg`, below 32);
/// returns its length. The inverse of [`parse_breg`] (which also takes offsets written
/// in more bytes than they need).
pub fn encode_breg(reg: u8, offset: i64, deref: bool, out: &mut [u8; BREG_EXPR_MAX]) -> usize {
    let mut len = 0;
    let mut push = |byte: u8| {
        if let Some(b) = out.get_mut(len) {
            *b = byte;
            len += 1;
        }
    };
    push(op::BREG0.wrapping_add(reg & 31));
    let mut v = offset;
    // Bounded: each turn shifts 7 bits out; at most 10 turns for 64 bits.
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        push(if done { byte } else { byte | 0x80 });
        if done {
            break;
        }
    }
    if deref {
        push(op::DEREF);
    }
    len
}

/// [`eval`] by the stack machine alone (every expression [`eval`] takes). Out of line: its
/// 128-byte stack and saved registers would otherwise be set up for the short forms too.
#[inline(never)]
pub fn eval_machine<M: UnwindMemory>(
    expr: &[u8],
    regs: &Regs,
    mem: &mut M,
    initial: Option<u64>,
) -> Result<u64, Error> {
    let mut stack = Stack {
        values: [0; MAX_EXPR_STACK],
        len: 0,
    };
    if let Some(v) = initial {
        stack.push(v)?;
    }
    let mut code = Bytes { rest: expr };
    let mut ops = 0;
    while !code.rest.is_empty() {
        ops += 1;
        if ops > MAX_EXPR_OPS {
            return Err(unsupported(Unsupported::ExpressionOps));
        }
        let opcode = code.u8()?;
        match opcode {
            op::LIT0..=op::LIT31 => stack.push(u64::from(opcode - op::LIT0))?,
            op::CONST1U => stack.push(u64::from(code.u8()?))?,
            op::CONST1S => stack.push(code.u8()? as i8 as i64 as u64)?,
            op::CONST2U => stack.push(u64::from(u16::from_le_bytes(code.le()?)))?,
            op::CONST2S => stack.push(i16::from_le_bytes(code.le()?) as i64 as u64)?,
            op::CONST4U => stack.push(u64::from(u32::from_le_bytes(code.le()?)))?,
            op::CONST4S => stack.push(i32::from_le_bytes(code.le()?) as i64 as u64)?,
            op::CONST8U | op::CONST8S => stack.push(u64::from_le_bytes(code.le()?))?,
            op::CONSTU => stack.push(code.leb(false)?)?,
            op::CONSTS => stack.push(code.leb(true)?)?,
            op::BREG0..=op::BREG31 => {
                let offset = code.leb(true)?;
                let base = reg_value(regs, u64::from(opcode - op::BREG0))?;
                stack.push(base.wrapping_add(offset))?;
            }
            op::BREGX => {
                let reg = code.leb(false)?;
                let offset = code.leb(true)?;
                stack.push(reg_value(regs, reg)?.wrapping_add(offset))?;
            }
            op::DUP => stack.push(stack.peek(0)?)?,
            op::DROP => {
                stack.pop()?;
            }
            op::OVER => stack.push(stack.peek(1)?)?,
            op::PICK => {
                let depth = usize::from(code.u8()?);
                stack.push(stack.peek(depth)?)?;
            }
            op::SWAP => {
                let a = stack.pop()?;
                let b = stack.pop()?;
                stack.push(a)?;
                stack.push(b)?;
            }
            op::ROT => {
                // (a b c -- c a b): the top moves to third place.
                let c = stack.pop()?;
                let b = stack.pop()?;
                let a = stack.pop()?;
                stack.push(c)?;
                stack.push(a)?;
                stack.push(b)?;
            }
            op::DEREF | op::DEREF_SIZE => {
                let size = if opcode == op::DEREF {
                    8
                } else {
                    usize::from(code.u8()?)
                };
                if size == 0 || size > 8 {
                    return Err(MALFORMED);
                }
                let addr = stack.pop()?;
                let mut b = [0u8; 8];
                let dst = b.get_mut(..size).ok_or(MALFORMED)?;
                if !mem.read(addr, dst) {
                    return Err(Error::Fault);
                }
                stack.push(u64::from_le_bytes(b))?;
            }
            op::ABS => {
                let a = stack.pop()? as i64;
                stack.push(a.wrapping_abs() as u64)?;
            }
            op::NEG => {
                let a = stack.pop()? as i64;
                stack.push(a.wrapping_neg() as u64)?;
            }
            op::NOT => {
                let a = stack.pop()?;
                stack.push(!a)?;
            }
            op::PLUS_UCONST => {
                let n = code.leb(false)?;
                let a = stack.pop()?;
                stack.push(a.wrapping_add(n))?;
            }
            op::AND
            | op::MINUS
            | op::MUL
            | op::OR
            | op::PLUS
            | op::SHL
            | op::SHR
            | op::SHRA
            | op::XOR
            | op::EQ
            | op::GE
            | op::GT
            | op::LE
            | op::LT
            | op::NE => {
                let b = stack.pop()?;
                let a = stack.pop()?;
                stack.push(binary(opcode, a, b))?;
            }
            op::NOP => {}
            _ => return Err(unsupported(Unsupported::ExpressionOp)),
        }
    }
    stack.pop()
}

/// `a op b` for a binary operation (`b` was on top). Shifts by 64 or more give 0 (or the
/// sign, for `shra`), comparisons are signed, as in gimli and libgcc.
fn binary(opcode: u8, a: u64, b: u64) -> u64 {
    let (sa, sb) = (a as i64, b as i64);
    match opcode {
        op::AND => a & b,
        op::MINUS => a.wrapping_sub(b),
        op::MUL => a.wrapping_mul(b),
        op::OR => a | b,
        op::PLUS => a.wrapping_add(b),
        op::SHL => a.checked_shl(shift(b)).unwrap_or(0),
        op::SHR => a.checked_shr(shift(b)).unwrap_or(0),
        op::SHRA => sa
            .checked_shr(shift(b))
            .unwrap_or(if sa < 0 { -1 } else { 0 }) as u64,
        op::XOR => a ^ b,
        op::EQ => u64::from(sa == sb),
        op::GE => u64::from(sa >= sb),
        op::GT => u64::from(sa > sb),
        op::LE => u64::from(sa <= sb),
        op::LT => u64::from(sa < sb),
        _ => u64::from(sa != sb),
    }
}

/// A shift count: anything from 64 up is "too far" (`checked_sh*` then fails).
fn shift(b: u64) -> u32 {
    u32::try_from(b).unwrap_or(u32::MAX)
}
