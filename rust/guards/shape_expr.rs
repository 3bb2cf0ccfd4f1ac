//! Integer expressions over tensor sizes: the lowered form of a `ShapeEnv`'s guards.
//!
//! Python (`guards/shape_guards.py`) lowers each sympy guard to nested tuples such as
//! `("eq", ("mul", ("var", 0), ("var", 1)), ("var", 2))`; this module evaluates them on
//! the sizes read at guard time, in plain Rust. Booleans are 0/1. Arithmetic that
//! overflows or divides by zero gives no value, and a guard without a value fails (a
//! recompile, never a wrong hit).

/// One expression node. Variables index the values loaded for the guard set.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Const(i64),
    Var(usize),
    Add(Vec<Expr>),
    Mul(Vec<Expr>),
    /// Floor division, rounding towards negative infinity (Python's `//`).
    FloorDiv(Box<Expr>, Box<Expr>),
    /// Remainder with the divisor's sign (Python's `%`).
    Mod(Box<Expr>, Box<Expr>),
    Pow(Box<Expr>, u32),
    Max(Vec<Expr>),
    Min(Vec<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn from_name(name: &str) -> Option<CmpOp> {
        Some(match name {
            "eq" => CmpOp::Eq,
            "ne" => CmpOp::Ne,
            "lt" => CmpOp::Lt,
            "le" => CmpOp::Le,
            "gt" => CmpOp::Gt,
            "ge" => CmpOp::Ge,
            _ => return None,
        })
    }

    #[inline]
    fn holds(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

impl Expr {
    /// The value for `vars`, or None (overflow, division by zero, a variable out of range).
    pub fn eval(&self, vars: &[i64]) -> Option<i64> {
        match self {
            Expr::Const(c) => Some(*c),
            Expr::Var(i) => vars.get(*i).copied(),
            Expr::Add(terms) => terms
                .iter()
                .try_fold(0i64, |acc, t| acc.checked_add(t.eval(vars)?)),
            Expr::Mul(terms) => terms
                .iter()
                .try_fold(1i64, |acc, t| acc.checked_mul(t.eval(vars)?)),
            Expr::FloorDiv(a, b) => floor_div(a.eval(vars)?, b.eval(vars)?),
            Expr::Mod(a, b) => python_mod(a.eval(vars)?, b.eval(vars)?),
            Expr::Pow(base, exp) => base.eval(vars)?.checked_pow(*exp),
            Expr::Max(items) => fold_all(items, vars, i64::max),
            Expr::Min(items) => fold_all(items, vars, i64::min),
            Expr::Cmp(op, a, b) => Some(i64::from(op.holds(a.eval(vars)?, b.eval(vars)?))),
            Expr::And(items) => {
                for item in items {
                    if item.eval(vars)? == 0 {
                        return Some(0);
                    }
                }
                Some(1)
            }
            Expr::Or(items) => {
                for item in items {
                    if item.eval(vars)? != 0 {
                        return Some(1);
                    }
                }
                Some(0)
            }
            Expr::Not(a) => Some(i64::from(a.eval(vars)? == 0)),
        }
    }

    /// True when the expression evaluates to a non-zero value.
    pub fn holds(&self, vars: &[i64]) -> bool {
        self.eval(vars).is_some_and(|v| v != 0)
    }
}

/// An expression in the form it is evaluated: shape guards are nearly all one comparison
/// of a size with a constant or another size (`s0 >= 2`, `x.size()[0] == y.size()[0]`),
/// which skip the recursive walk (a third of a dynamic entry's guard time before).
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Compare(CmpOp, Operand, Operand),
    Other(Expr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Var(usize),
    Const(i64),
}

impl Operand {
    fn of(expr: &Expr) -> Option<Operand> {
        match expr {
            Expr::Var(i) => Some(Operand::Var(*i)),
            Expr::Const(c) => Some(Operand::Const(*c)),
            _ => None,
        }
    }

    #[inline]
    fn value(self, vars: &[i64]) -> Option<i64> {
        match self {
            Operand::Var(i) => vars.get(i).copied(),
            Operand::Const(c) => Some(c),
        }
    }
}

impl Test {
    pub fn new(expr: Expr) -> Test {
        if let Expr::Cmp(op, a, b) = &expr {
            if let (Some(a), Some(b)) = (Operand::of(a), Operand::of(b)) {
                return Test::Compare(*op, a, b);
            }
        }
        Test::Other(expr)
    }

    /// The same answer as `Expr::holds` on the expression it was made from.
    #[inline]
    pub fn holds(&self, vars: &[i64]) -> bool {
        match self {
            Test::Compare(op, a, b) => match (a.value(vars), b.value(vars)) {
                (Some(a), Some(b)) => op.holds(a, b),
                _ => false,
            },
            Test::Other(expr) => expr.holds(vars),
        }
    }
}

fn fold_all(items: &[Expr], vars: &[i64], pick: fn(i64, i64) -> i64) -> Option<i64> {
    let (first, rest) = items.split_first()?;
    rest.iter().try_fold(first.eval(vars)?, |acc, item| {
        Some(pick(acc, item.eval(vars)?))
    })
}

fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    // Truncation rounded towards zero; step down when the signs differ and it was inexact.
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

fn python_mod(a: i64, b: i64) -> Option<i64> {
    let r = a.checked_rem(b)?;
    if r != 0 && ((r < 0) != (b < 0)) {
        r.checked_add(b)
    } else {
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_box_returns)] // operands of Expr are boxed
    fn var(i: usize) -> Box<Expr> {
        Box::new(Expr::Var(i))
    }

    #[allow(clippy::unnecessary_box_returns)]
    fn c(v: i64) -> Box<Expr> {
        Box::new(Expr::Const(v))
    }

    #[test]
    fn arithmetic_follows_python() {
        // (a, b, a // b) as Python computes them
        for (a, b, floor) in [
            (7, 2, 3),
            (-7, 2, -4),
            (7, -2, -4),
            (-7, -2, 3),
            (6, 3, 2),
            (0, 5, 0),
        ] {
            let div = Expr::FloorDiv(c(a), c(b)).eval(&[]).unwrap();
            let rem = Expr::Mod(c(a), c(b)).eval(&[]).unwrap();
            assert_eq!(div, floor, "{a} // {b}");
            assert_eq!(div * b + rem, a, "{a} % {b}");
            assert!(rem == 0 || (rem < 0) == (b < 0));
        }
        assert_eq!(Expr::Pow(c(3), 4).eval(&[]), Some(81));
        assert_eq!(
            Expr::Max(vec![Expr::Var(0), Expr::Const(4)]).eval(&[9]),
            Some(9)
        );
        assert_eq!(
            Expr::Min(vec![Expr::Var(0), Expr::Const(4)]).eval(&[9]),
            Some(4)
        );
    }

    #[test]
    fn relation_between_sizes() {
        // s0 * s1 == s2
        let guard = Expr::Cmp(
            CmpOp::Eq,
            Box::new(Expr::Mul(vec![Expr::Var(0), Expr::Var(1)])),
            var(2),
        );
        assert!(guard.holds(&[3, 4, 12]));
        assert!(!guard.holds(&[3, 4, 13]));
    }

    #[test]
    fn bounds_and_divisibility() {
        let bounds = Expr::And(vec![
            Expr::Cmp(CmpOp::Ge, var(0), c(2)),
            Expr::Cmp(CmpOp::Le, var(0), c(64)),
            Expr::Cmp(CmpOp::Eq, Box::new(Expr::Mod(var(0), c(8))), c(0)),
        ]);
        assert!(bounds.holds(&[16]));
        assert!(!bounds.holds(&[1]));
        assert!(!bounds.holds(&[12]));
        assert!(!bounds.holds(&[72]));
        let either = Expr::Or(vec![
            Expr::Cmp(CmpOp::Lt, var(0), c(2)),
            Expr::Not(Box::new(Expr::Const(0))),
        ]);
        assert!(either.holds(&[5]));
        assert!(Expr::Cmp(CmpOp::Ne, var(0), c(3)).holds(&[4]));
        assert!(Expr::Cmp(CmpOp::Gt, var(0), var(1)).holds(&[4, 3]));
        assert!(!Expr::Cmp(CmpOp::Lt, var(0), var(1)).holds(&[4, 3]));
    }

    #[test]
    fn tests_agree_with_expressions() {
        let exprs = [
            Expr::Cmp(CmpOp::Ge, var(0), c(2)),
            Expr::Cmp(CmpOp::Eq, var(0), var(1)),
            Expr::Cmp(CmpOp::Lt, c(3), var(1)),
            Expr::Cmp(CmpOp::Ne, var(5), c(3)), // out of range: no value, fails
            Expr::Cmp(CmpOp::Eq, Box::new(Expr::Mod(var(0), c(8))), c(0)),
            Expr::Var(1),
        ];
        let fast = exprs.iter().filter(|e| matches!(Test::new((*e).clone()), Test::Compare(..)));
        assert_eq!(fast.count(), 4);
        for vars in [[0, 0], [2, 2], [8, 3], [3, 8], [16, 16], [-1, 4]] {
            for expr in &exprs {
                assert_eq!(Test::new(expr.clone()).holds(&vars), expr.holds(&vars), "{expr:?} on {vars:?}");
            }
        }
    }

    #[test]
    fn failures_have_no_value() {
        assert_eq!(Expr::FloorDiv(c(1), c(0)).eval(&[]), None);
        assert_eq!(Expr::Mod(c(1), c(0)).eval(&[]), None);
        assert_eq!(
            Expr::Mul(vec![Expr::Const(i64::MAX), Expr::Const(2)]).eval(&[]),
            None
        );
        assert_eq!(Expr::FloorDiv(c(i64::MIN), c(-1)).eval(&[]), None);
        assert_eq!(Expr::Var(3).eval(&[1]), None);
        assert!(!Expr::Cmp(CmpOp::Eq, Box::new(Expr::FloorDiv(c(1), c(0))), c(0)).holds(&[]));
        assert_eq!(Expr::Max(vec![]).eval(&[]), None);
    }
}
