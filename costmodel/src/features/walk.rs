//! The walk over a lowered program: loops, region starts, allocations and guards pushed and
//! popped around each store, whose features are taken where it sits.

use super::layout::StoreFeatures;
use super::lets::{Lets, subst};
use super::nest::{Loop, MAX_DEPTH, NOT_ENCLOSING, Walker};
use tunehub_engine::lower::{LoweredFunc, Stmt};

pub(super) fn walk(func: &LoweredFunc, names: bool) -> Vec<StoreFeatures> {
    let mut w = Walker {
        func,
        names,
        loops: vec![],
        depth: vec![],
        lets: Lets::default(),
        allocs: vec![],
        guards: vec![],
        out: vec![],
    };
    w.walk(&func.body);
    w.out
}

impl<'a> Walker<'a> {
    fn walk(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            match s {
                Stmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    assert!(
                        self.loops.len() < MAX_DEPTH,
                        "a loop nest deeper than {MAX_DEPTH} loops"
                    );
                    self.set_depth(*var, self.loops.len() as u8);
                    self.loops.push(Loop {
                        var: *var,
                        extent: *extent,
                        kind: *kind,
                        perfect: body.len() == 1,
                    });
                    self.walk(body);
                    self.loops.pop();
                    self.set_depth(*var, NOT_ENCLOSING);
                }
                Stmt::Let { var, value } => {
                    let v = subst(value, &self.lets).into_owned();
                    self.lets.insert(*var, v);
                }
                Stmt::Alloc { buf, body } => {
                    self.allocs.push((*buf, self.outer_prod()));
                    self.walk(body);
                    self.allocs.pop();
                }
                Stmt::Guard { conds, body } => {
                    let n = self.guards.len();
                    self.guards.extend(conds.iter().map(|(l, _)| l));
                    self.walk(body);
                    self.guards.truncate(n);
                }
                Stmt::Store {
                    buf,
                    index,
                    value,
                    reduce,
                } => {
                    let f = self.store(*buf, index, value, *reduce);
                    self.out.push(f);
                }
            }
        }
    }
}
