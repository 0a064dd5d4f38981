//! A group's computation in tunehub's text form (docs/text-form.md), which the engine parses
//! and validates: the anchor's statements (padding, the reduction), then one statement for
//! the whole epilogue. Inputs are declared with the model's shapes; constant weights read by
//! the anchor are named layout-free (packed once, as Ansor's layout rewrite does).

use crate::error::ImportError;
use crate::fuse::Group;
use crate::graph::{Graph, Node};
use crate::layout::Layout;
use crate::operand::{Operand, Operands};
use crate::quantized::{QUANTIZE, dequantized_from, eight_bit, producer, single};
use std::collections::HashMap;
use std::fmt::Write as _;
use tunehub_engine::ir::DType;

/// NCHW read as NHWC (`Operand::Transposed`'s `perm`).
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// An NHWC result read as NCHW (`Call::output_perm`).
const FROM_NHWC: [usize; 4] = [0, 3, 1, 2];
/// The NCHW index of an NHWC result's point `[i0,i1,i2,i3]` (`Anchor::logical`).
const NHWC_LOGICAL: [&str; 4] = ["i0", "i3", "i1", "i2"];

/// A group's workload.
#[derive(Debug, Clone)]
pub struct Generated {
    pub expr: String,
    pub layout_free: Vec<String>,
    /// Every declared input with where its values come from.
    pub operands: Operands,
    /// When the anchor writes its result in another layout than the model's: axis `i` of the
    /// model's tensor is axis `perm[i]` of the result (a convolution in NHWC: `[0,3,1,2]`).
    pub output_perm: Option<Vec<usize>>,
    /// Workloads that run before this one, into tensors the model does not name (a Winograd
    /// convolution's transformed input and its product), in order.
    pub pre: Vec<Pre>,
}

/// A workload run before a group's own, into a tensor of its own (`Generated::pre`).
#[derive(Debug, Clone)]
pub struct Pre {
    /// The text form; with `spec`, the library operator it is.
    pub expr: String,
    pub spec: Option<tunehub_engine::ops::OpSpec>,
    pub operands: Operands,
    pub layout_free: Vec<String>,
    /// Its result: a name the model does not use, and its shape.
    pub output: String,
    pub shape: Vec<i64>,
}

/// The group's workload, its f32 window operator (a convolution, a pool) written in `layout`.
pub fn generate(g: &Graph, group: &Group, layout: Layout) -> Result<Generated, ImportError> {
    // A matrix product is first written over its rows flattened (one 2-D loop nest, as a
    // dense layer is); an epilogue operand that does not fit that view gets the batched form.
    match Gen::new(g, group, layout).group(group, true) {
        Ok(r) => Ok(r),
        Err(_) => Gen::new(g, group, layout).group(group, false),
    }
}

/// Whether an elementwise chain (no anchor) reads, as an operand of its output's shape, the
/// f32 cast of an integer convolution's sums (a dynamically quantized model's scaling).
fn reads_integer_conv(g: &Graph, group: &Group) -> bool {
    let Some(out) = g.shape(&group.output) else {
        return false;
    };
    group.nodes().any(|i| {
        g.nodes[i]
            .inputs
            .iter()
            .any(|t| g.shape(t) == Some(out) && crate::integer::cast_of_conv_sums(g, t))
    })
}

/// The anchor's result as the epilogue reads it.
struct Anchor {
    /// The output stage's variables and extents.
    vars: Vec<(String, i64)>,
    /// The index of each dimension of the ONNX output, as an affine expression of `vars`.
    logical: Vec<String>,
    /// Its value at the point (`O[i0,i1]`, or with the node's own bias added).
    value: String,
    /// Its value without the node's own bias (what a folded batch norm adds its bias to).
    core: String,
    /// Rows flattened: the output is `[rows, columns]`, whatever its ONNX rank.
    flat: Option<(i64, i64)>,
}

struct Gen<'g> {
    g: &'g Graph,
    /// The group is an elementwise chain between conversions (`Group::eight_bit`).
    eight_bit: bool,
    /// The type of the group's result: f32, or the 8-bit type its `QuantizeLinear` writes.
    out_type: DType,
    decls: Vec<String>,
    stmts: Vec<String>,
    /// Input names by source, in declaration order.
    inputs: Operands,
    layout_free: Vec<String>,
    /// Write a window operator (a convolution, a pool, the global pool) in NHWC
    /// (`Layout::Nhwc`).
    nhwc: bool,
    /// The model's (NCHW) shape of the anchor's result, when it is written in NHWC: an
    /// epilogue operand of that shape (a residual add's shortcut) is read in NHWC too.
    nhwc_out: Option<Vec<i64>>,
    /// The NHWC index of the output stage's point, when its variables are not `[n, h, w, c]`
    /// (a Winograd output transform's tiles): how an NHWC operand is read.
    nhwc_index: Option<Vec<String>>,
    /// 3x3 stride-1 convolutions by Winograd's minimal filtering (`Layout::Winograd`).
    winograd: bool,
    /// Workloads before this one (`Generated::pre`).
    pre: Vec<Pre>,
}

fn list(v: &[String]) -> String {
    v.join(",")
}

fn wheres(vars: &[(String, i64)]) -> String {
    vars.iter()
        .map(|(v, e)| format!("{v}<{e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn vars(prefix: &str, extents: &[i64]) -> Vec<(String, i64)> {
    extents
        .iter()
        .enumerate()
        .map(|(i, &e)| (format!("{prefix}{i}"), e))
        .collect()
}

fn names(vars: &[(String, i64)]) -> Vec<String> {
    vars.iter().map(|v| v.0.clone()).collect()
}

/// `a*s + b*d`, written plainly.
fn window(out: &str, stride: i64, r: &str, dil: i64, off: i64) -> String {
    let mut s = if stride == 1 {
        out.to_string()
    } else {
        format!("{out}*{stride}")
    };
    if dil == 1 {
        let _ = write!(s, "+{r}");
    } else {
        let _ = write!(s, "+{r}*{dil}");
    }
    if off > 0 {
        let _ = write!(s, "+{off}");
    } else if off < 0 {
        let _ = write!(s, "{off}");
    }
    s
}

/// The type the text form says before a name: none for f32 (`u8 ` for u8).
fn typed(t: DType) -> String {
    match t {
        DType::F32 => String::new(),
        t => format!("{} ", t.name()),
    }
}

/// A float constant as the text form reads it.
fn num(v: f64) -> String {
    let s = format!("{v:?}");
    if v < 0.0 { format!("({s})") } else { s }
}

impl<'g> Gen<'g> {
    fn new(g: &'g Graph, group: &Group, layout: Layout) -> Self {
        Gen {
            eight_bit: group.eight_bit,
            ..Gen::plain(g, layout)
        }
    }

    /// A generator of an f32 workload with nothing written yet.
    fn plain(g: &'g Graph, layout: Layout) -> Self {
        Gen {
            g,
            eight_bit: false,
            out_type: DType::F32,
            decls: vec![],
            stmts: vec![],
            inputs: vec![],
            layout_free: vec![],
            nhwc: layout.nhwc(),
            winograd: layout == Layout::Winograd,
            pre: vec![],
            nhwc_out: None,
            nhwc_index: None,
        }
    }

    /// The program written so far: the declarations, then the statements.
    fn program(&self) -> String {
        let mut expr = self.decls.join("\n");
        for s in &self.stmts {
            expr.push('\n');
            expr.push_str(s);
        }
        expr
    }

    /// The input name of tensor `t`, declared with `shape` the first time.
    fn input(&mut self, t: &str, hint: &str, shape: &[i64]) -> String {
        self.input_of(Operand::tensor(t), hint, shape)
    }

    /// The input name of `key`, declared with `shape` the first time.
    fn input_of(&mut self, key: Operand, hint: &str, shape: &[i64]) -> String {
        self.typed_input(key, hint, shape, DType::F32)
    }

    /// [`Gen::input_of`] of elements of type `t`.
    fn typed_input(&mut self, key: Operand, hint: &str, shape: &[i64], t: DType) -> String {
        if let Some((n, _)) = self.inputs.iter().find(|(_, k)| *k == key) {
            return n.clone();
        }
        let name = if self.inputs.iter().any(|(n, _)| n == hint) {
            format!("{hint}{}", self.inputs.len())
        } else {
            hint.to_string()
        };
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        self.decls
            .push(format!("input {}{name}[{}]", typed(t), list(&dims)));
        self.inputs.push((name.clone(), key));
        name
    }

    /// A weight the anchor reads: layout-free when it is a constant of the model.
    fn weight(&mut self, t: &str, hint: &str, shape: &[i64]) -> String {
        let name = self.input(t, hint, shape);
        if self.g.is_constant(t) && !self.layout_free.contains(&name) {
            self.layout_free.push(name.clone());
        }
        name
    }

    fn group(mut self, group: &Group, flat: bool) -> Result<Generated, ImportError> {
        let g = self.g;
        let anchor = match group.anchor {
            Some(a) => self.anchor(&g.nodes[a], flat)?,
            None => {
                let n = &g.nodes[group.members[0]];
                let shape = g.need_shape(n, &n.outputs[0])?;
                let total: i64 = shape.iter().product();
                // A chain between conversions is first written flat, one row: its 8-bit
                // loads and stores then run in the C compiler's vectors (the engine's own are
                // f32), and its operands of the output's shape are read in any layout. One of
                // another shape does not fit and gets the nested form, as a channel does (its
                // index is not in a flat row: `logical` is empty).
                let (v, logical, flat) = if flat && self.eight_bit {
                    (vars("i", &[1, total]), vec![], Some((1, total)))
                } else if shape.len() == 4 && reads_integer_conv(g, group) {
                    // After an integer convolution (its NHWC result cast to f32), the chain
                    // runs in NHWC too: it reads that result as kept, a per-channel operand by
                    // the inner index, and leaves its own kept for the next convolution.
                    self.nhwc_out = Some(shape.clone());
                    let nhwc: Vec<i64> = TO_NHWC.iter().map(|&p| shape[p]).collect();
                    let logical = NHWC_LOGICAL.map(String::from).to_vec();
                    (vars("i", &nhwc), logical, None)
                } else {
                    let v = vars("i", &shape);
                    let logical = names(&v);
                    (v, logical, None)
                };
                Anchor {
                    logical,
                    vars: v,
                    value: String::new(),
                    core: String::new(),
                    flat,
                }
            }
        };
        let members: Vec<&Node> = group.members.iter().map(|&m| &g.nodes[m]).collect();
        let mut exprs: HashMap<String, String> = HashMap::new();
        if let Some(a) = group.anchor {
            exprs.insert(g.nodes[a].outputs[0].clone(), anchor.value.clone());
        }
        let conv = group.anchor.map(|a| &g.nodes[a]).filter(|a| a.op == "Conv");
        let mut last = anchor.value.clone();
        for n in &members {
            let e = self.elementwise(n, &anchor, &exprs, conv)?;
            exprs.insert(n.outputs[0].clone(), e.clone());
            last = e;
        }
        let out_vars = names(&anchor.vars);
        let out_load = format!("O[{}]", list(&out_vars));
        if last != out_load && !last.is_empty() {
            self.stmts.push(format!(
                "{}Y[{}] = {last} where {}",
                typed(self.out_type),
                list(&out_vars),
                wheres(&anchor.vars)
            ));
        }
        let expr = self.program();
        Ok(Generated {
            expr,
            layout_free: self.layout_free,
            operands: self.inputs,
            output_perm: self.nhwc_out.is_some().then(|| FROM_NHWC.to_vec()),
            pre: self.pre,
        })
    }

    /// The value of tensor `t` inside the epilogue.
    fn value(
        &mut self,
        t: &str,
        anchor: &Anchor,
        exprs: &HashMap<String, String>,
    ) -> Result<String, String> {
        if let Some(e) = exprs.get(t) {
            return Ok(e.clone());
        }
        if let Some(v) = self.g.scalar(t) {
            return Ok(num(v));
        }
        let shape = self
            .g
            .shape(t)
            .ok_or_else(|| format!("the shape of '{t}' is not known"))?
            .to_vec();
        if let Some(out) = self.nhwc_out.clone()
            && shape == out
        {
            let dims: Vec<i64> = TO_NHWC.iter().map(|&p| out[p]).collect();
            let key = Operand::Transposed {
                name: t.to_string(),
                perm: TO_NHWC.to_vec(),
            };
            let name = self.input_of(key, "T", &dims);
            let index = self
                .nhwc_index
                .clone()
                .unwrap_or_else(|| names(&anchor.vars));
            return Ok(format!("{name}[{}]", list(&index)));
        }
        let (dims, idx) = self.broadcast(&shape, anchor)?;
        // A chain between conversions reads the 8-bit tensor and dequantizes it itself.
        if self.eight_bit
            && let Some((q, dtype, scale, zero_point)) = dequantized_from(self.g, t)
        {
            let name = self.typed_input(Operand::tensor(q), "T", &dims, dtype);
            let scale = num(f64::from(scale));
            return Ok(format!(
                "(({name}[{}] - {zero_point}) * {scale})",
                list(&idx)
            ));
        }
        let name = self.input(t, "T", &dims);
        Ok(format!("{name}[{}]", list(&idx)))
    }

    /// How an operand of `shape` broadcast to the output is declared and indexed: its size-1
    /// dimensions dropped.
    fn broadcast(&self, shape: &[i64], a: &Anchor) -> Result<(Vec<i64>, Vec<String>), String> {
        let total: i64 = shape.iter().product();
        if let Some((rows, cols)) = a.flat {
            let v = names(&a.vars);
            let tail: Vec<i64> = shape.iter().copied().skip_while(|&d| d == 1).collect();
            return if total == rows * cols {
                Ok((vec![rows, cols], v))
            } else if tail.len() <= 1 && total == cols {
                Ok((vec![cols], vec![v[1].clone()]))
            } else {
                Err("an operand that does not fit the flattened rows".into())
            };
        }
        let r = a.logical.len();
        if shape.len() > r {
            return Err("an operand of a higher rank than the output".into());
        }
        let mut dims = vec![];
        let mut idx = vec![];
        for (d, &e) in shape.iter().enumerate() {
            if e == 1 {
                continue;
            }
            dims.push(e);
            idx.push(a.logical[r - shape.len() + d].clone());
        }
        if dims.is_empty() {
            dims.push(1);
            idx.push("0".into());
        }
        Ok((dims, idx))
    }

    fn elementwise(
        &mut self,
        n: &Node,
        a: &Anchor,
        exprs: &HashMap<String, String>,
        conv: Option<&Node>,
    ) -> Result<String, ImportError> {
        let err = |m: String| ImportError::node(n, m);
        let x = n.input(0).ok_or_else(|| err("no input".into()))?;
        let v = |s: &mut Self, t: &str| s.value(t, a, exprs).map_err(err);
        let unary = |s: &mut Self, f: &str| -> Result<String, ImportError> {
            Ok(format!("{f}({})", v(s, x)?))
        };
        Ok(match n.op.as_str() {
            "Add" | "Sub" | "Mul" | "Div" => {
                let y = n.input(1).ok_or_else(|| err("one operand".into()))?;
                let o = match n.op.as_str() {
                    "Add" => "+",
                    "Sub" => "-",
                    "Mul" => "*",
                    _ => "/",
                };
                format!("({} {o} {})", v(self, x)?, v(self, y)?)
            }
            "Relu" => unary(self, "relu")?,
            "Sigmoid" => unary(self, "sigmoid")?,
            "Tanh" => unary(self, "tanh")?,
            "Erf" => unary(self, "erf")?,
            "Sqrt" => unary(self, "sqrt")?,
            "Exp" => unary(self, "exp")?,
            "Abs" => unary(self, "abs")?,
            "Neg" => format!("(-{})", v(self, x)?),
            "Clip" => {
                let bound = |i: usize, attr: &str| {
                    n.input(i)
                        .and_then(|t| self.g.scalar(t))
                        .or_else(|| n.float(attr).map(f64::from))
                        .filter(|b| b.is_finite() && b.abs() < 1e30)
                };
                let (lo, hi) = (bound(1, "min"), bound(2, "max"));
                let mut e = v(self, x)?;
                if let Some(lo) = lo {
                    e = format!("max({e}, {})", num(lo));
                }
                if let Some(hi) = hi {
                    e = format!("min({e}, {})", num(hi));
                }
                e
            }
            "LeakyRelu" => {
                let alpha = n.float("alpha").unwrap_or(0.01);
                let e = v(self, x)?;
                format!("select({e} > 0, {e}, {} * {e})", num(f64::from(alpha)))
            }
            "Pow" => {
                let e = v(self, x)?;
                let p = n.input(1).and_then(|t| self.g.scalar(t)).unwrap_or(1.0);
                if p == 0.5 {
                    format!("sqrt({e})")
                } else if p == 2.0 {
                    format!("({e} * {e})")
                } else if p == 3.0 {
                    format!("({e} * {e} * {e})")
                } else {
                    e
                }
            }
            "Gelu" => {
                let e = v(self, x)?;
                if n.string("approximate").as_deref() == Some("tanh") {
                    format!(
                        "(0.5 * {e} * (1.0 + tanh(0.7978845608028654 * ({e} + 0.044715 * {e} * {e} * {e}))))"
                    )
                } else {
                    format!("(0.5 * {e} * (1.0 + erf({e} * 0.7071067811865476)))")
                }
            }
            "BatchNormalization" => {
                let c = a
                    .logical
                    .get(1)
                    .cloned()
                    .ok_or_else(|| err("an input of rank < 2".into()))?;
                let channels = self.g.need_shape(n, x)?[1];
                let bn = n.name.clone();
                let plain = self.nhwc_out.is_none();
                match conv.filter(|cv| plain && cv.outputs.first().map(String::as_str) == Some(x)) {
                    Some(cv) => {
                        // Folded into the convolution at inference: its scale goes into the
                        // kernel's weight, what remains is one bias per channel (the
                        // convolution's own merged in).
                        let w = cv.input(1).unwrap_or_default().to_string();
                        let folded = Operand::FoldedWeight {
                            weight: w.clone(),
                            bn: bn.clone(),
                        };
                        for (_, k) in &mut self.inputs {
                            if *k == Operand::tensor(&w) {
                                *k = folded.clone();
                            }
                        }
                        let bias = cv.input(2).map(str::to_string);
                        let b = self.input_of(Operand::FoldedBias { bias, bn }, "B", &[channels]);
                        format!("({} + {b}[{c}])", a.core)
                    }
                    None => {
                        let s =
                            self.input_of(Operand::BnScale { bn: bn.clone() }, "Sc", &[channels]);
                        let b = self.input_of(Operand::BnShift { bn }, "B", &[channels]);
                        format!("({} * {s}[{c}] + {b}[{c}])", v(self, x)?)
                    }
                }
            }
            // The end of a chain between conversions: rounded before the zero point is added,
            // as ONNX specifies; the 8-bit result saturates as it is stored.
            QUANTIZE if self.eight_bit => {
                let t = eight_bit(self.g, n).ok_or_else(|| err("not 8-bit".into()))?;
                let scale = n.input(1).and_then(|s| self.g.floats(s));
                let (Some(&[scale]), Some(zero_point)) = (scale.as_deref(), single(self.g, n))
                else {
                    return Err(err("not one scale and zero point".into()));
                };
                self.out_type = t;
                format!(
                    "(round({} / {}) + {zero_point})",
                    v(self, x)?,
                    num(f64::from(scale))
                )
            }
            op => return Err(err(format!("{op} is not elementwise"))),
        })
    }

    fn anchor(&mut self, n: &Node, flat: bool) -> Result<Anchor, ImportError> {
        let g = self.g;
        let x = n.input(0).ok_or_else(|| ImportError::node(n, "no input"))?;
        let xs = g.need_shape(n, x)?;
        let out = g.need_shape(n, &n.outputs[0])?;
        // An integer operator is written as the f32 one its integer form retypes.
        match crate::integer::float_op(&n.op) {
            "Conv" => self.conv(n, x, &xs, &out),
            "MaxPool" | "AveragePool" => self.pool(n, x, &xs, &out),
            "GlobalAveragePool" => {
                let v = vars("i", &xs[..2]);
                let r = vars("k", &xs[2..]);
                let sp = list(&names(&v));
                // In NHWC it reads the convolutions' result as they keep it, channels inner.
                let read = if self.nhwc && xs.len() == 4 {
                    let key = Operand::Transposed {
                        name: x.to_string(),
                        perm: TO_NHWC.to_vec(),
                    };
                    let xn = self.input_of(key, "X", &[xs[0], xs[2], xs[3], xs[1]]);
                    format!("{xn}[i0,k0,k1,i1]")
                } else {
                    let xn = self.input(x, "X", &xs);
                    format!("{xn}[{sp},k0,k1]")
                };
                self.stmts.push(format!(
                    "O[{sp}] += {read} where {}, {}",
                    wheres(&v),
                    wheres(&r)
                ));
                let load = format!("O[{sp}]");
                let value = format!("{load} * {}", num(1.0 / (xs[2] * xs[3]) as f64));
                let mut logical = names(&v);
                logical.extend(["0".to_string(), "0".to_string()]);
                Ok(Anchor {
                    vars: v,
                    logical,
                    value: value.clone(),
                    core: value,
                    flat: None,
                })
            }
            "ReduceMean" => {
                let axes = crate::classify::reduced_axes(g, n, xs.len())
                    .ok_or_else(|| ImportError::node(n, "axes that are not constant"))?;
                let xn = self.input(x, "X", &xs);
                let extents = |summed: bool| -> Vec<i64> {
                    (0..xs.len())
                        .filter(|d| axes.contains(d) == summed)
                        .map(|d| xs[d])
                        .collect()
                };
                let v = vars("i", &extents(false));
                let red = vars("k", &extents(true));
                // The input read in its own order: a kept axis by its `i`, a summed one by its `k`.
                let (mut iv, mut kv) = (names(&v).into_iter(), names(&red).into_iter());
                let read: Vec<String> = (0..xs.len())
                    .map(|d| {
                        if axes.contains(&d) {
                            kv.next()
                        } else {
                            iv.next()
                        }
                    })
                    .map(|s| s.expect("one name per axis"))
                    .collect();
                self.stmts.push(format!(
                    "O[{}] += {xn}[{}] where {}, {}",
                    list(&names(&v)),
                    list(&read),
                    wheres(&v),
                    wheres(&red)
                ));
                let count: i64 = extents(true).iter().product();
                let value = format!("O[{}] * {}", list(&names(&v)), num(1.0 / count as f64));
                // The output's indices: with keepdims, each summed axis stays as a 0 in place.
                let mut iv = names(&v).into_iter();
                let logical: Vec<String> = if n.int("keepdims").unwrap_or(1) != 0 {
                    (0..xs.len())
                        .map(|d| {
                            if axes.contains(&d) {
                                Some("0".into())
                            } else {
                                iv.next()
                            }
                        })
                        .map(|s| s.expect("one name per kept axis"))
                        .collect()
                } else {
                    names(&v)
                };
                Ok(Anchor {
                    vars: v,
                    logical,
                    value: value.clone(),
                    core: value,
                    flat: None,
                })
            }
            "Softmax" => {
                let r = xs.len() as i64;
                let axis = n.int("axis").unwrap_or(-1);
                let axis = (if axis < 0 { axis + r } else { axis }) as usize;
                let xn = self.input(x, "X", &xs);
                let v = vars("i", &xs);
                let all = names(&v);
                let rows: Vec<(String, i64)> = v
                    .iter()
                    .enumerate()
                    .filter(|(d, _)| *d != axis)
                    .map(|(_, x)| x.clone())
                    .collect();
                let rn = list(&names(&rows));
                let mut red = all.clone();
                red[axis] = "k0".into();
                let red = list(&red);
                let k = format!("k0<{}", xs[axis]);
                let (a, rw) = (list(&all), wheres(&rows));
                self.stmts
                    .push(format!("M[{rn}] max= {xn}[{red}] where {rw}, {k}"));
                self.stmts.push(format!(
                    "E[{a}] = exp({xn}[{a}] - M[{rn}]) where {}",
                    wheres(&v)
                ));
                self.stmts
                    .push(format!("S[{rn}] += E[{red}] where {rw}, {k}"));
                self.stmts
                    .push(format!("O[{a}] = E[{a}] / S[{rn}] where {}", wheres(&v)));
                let load = format!("O[{a}]");
                Ok(Anchor {
                    logical: all,
                    vars: v,
                    value: load.clone(),
                    core: load,
                    flat: None,
                })
            }
            "LayerNormalization" => {
                let r = xs.len() - 1;
                let len = xs[r];
                let eps = n.float("epsilon").unwrap_or(1e-5);
                let xn = self.input(x, "X", &xs);
                let v = vars("i", &xs);
                let rows = &v[..r];
                let rn = list(&names(rows));
                let all = names(&v);
                let a = list(&all);
                let mut red = all.clone();
                red[r] = "k0".into();
                let red = list(&red);
                let inv = num(1.0 / len as f64);
                let (rw, vw) = (wheres(rows), wheres(&v));
                let j = &all[r];
                self.stmts
                    .push(format!("S1[{rn}] += {xn}[{red}] where {rw}, k0<{len}"));
                self.stmts
                    .push(format!("D[{a}] = {xn}[{a}] - S1[{rn}] * {inv} where {vw}"));
                self.stmts.push(format!(
                    "S2[{rn}] += D[{red}] * D[{red}] where {rw}, k0<{len}"
                ));
                let mut e = format!("D[{a}] * rsqrt(S2[{rn}] * {inv} + {})", num(f64::from(eps)));
                if let Some(s) = n.input(1) {
                    let s = self.weight(s, "G", &[len]);
                    e = format!("{e} * {s}[{j}]");
                }
                if let Some(b) = n.input(2) {
                    let b = self.weight(b, "B", &[len]);
                    e = format!("{e} + {b}[{j}]");
                }
                self.stmts.push(format!("O[{a}] = {e} where {vw}"));
                let load = format!("O[{a}]");
                Ok(Anchor {
                    logical: all,
                    vars: v,
                    value: load.clone(),
                    core: load,
                    flat: None,
                })
            }
            "MatMul" => {
                let w = n
                    .input(1)
                    .ok_or_else(|| ImportError::node(n, "one operand"))?;
                let ws = g.need_shape(n, w)?;
                self.matmul(n, (x, &xs, false), (w, &ws, false), &out, flat, None)
            }
            "Gemm" => {
                let w = n
                    .input(1)
                    .ok_or_else(|| ImportError::node(n, "one operand"))?;
                let ws = g.need_shape(n, w)?;
                let ta = n.int("transA").unwrap_or(0) != 0;
                let tb = n.int("transB").unwrap_or(0) != 0;
                let alpha = f64::from(n.float("alpha").unwrap_or(1.0));
                let beta = f64::from(n.float("beta").unwrap_or(1.0));
                let bias = n.input(2).map(|c| (c, beta));
                let mut a = self.matmul(n, (x, &xs, ta), (w, &ws, tb), &out, false, bias)?;
                if alpha != 1.0 {
                    a.value = a.value.replacen("O[", &format!("{} * O[", num(alpha)), 1);
                    a.core = a.core.replacen("O[", &format!("{} * O[", num(alpha)), 1);
                }
                Ok(a)
            }
            op => Err(ImportError::node(n, format!("{op} is not an anchor"))),
        }
    }

    /// `O = A @ B` with numpy's batch broadcasting; with `flat`, rows of a 2-D weight's
    /// product are flattened into one dimension.
    fn matmul(
        &mut self,
        n: &Node,
        (a, as_, ta): (&str, &[i64], bool),
        (b, bs, tb): (&str, &[i64], bool),
        out: &[i64],
        flat: bool,
        bias: Option<(&str, f64)>,
    ) -> Result<Anchor, ImportError> {
        let (ra, rb) = (as_.len(), bs.len());
        let k = if ta { as_[ra - 2] } else { as_[ra - 1] };
        let r = out.len();
        let (m, cols) = (out[r - 2], out[r - 1]);
        let flatten = flat && rb == 2 && !ta;
        let mut anchor = if flatten {
            let rows = out[..r - 1].iter().product::<i64>();
            let an = self.input(a, "A", &[rows, k]);
            let bn = self.weight(b, "B", bs);
            let bidx = if tb { "i1,k0" } else { "k0,i1" };
            self.stmts.push(format!(
                "O[i0,i1] += {an}[i0,k0] * {bn}[{bidx}] where i0<{rows}, i1<{cols}, k0<{k}"
            ));
            Anchor {
                vars: vec![("i0".into(), rows), ("i1".into(), cols)],
                // Per ONNX dimension only when there was nothing to flatten.
                logical: if r == 2 {
                    vec!["i0".into(), "i1".into()]
                } else {
                    vec![]
                },
                value: "O[i0,i1]".into(),
                core: "O[i0,i1]".into(),
                flat: Some((rows, cols)),
            }
        } else {
            let v = vars("i", out);
            let all = names(&v);
            let idx = |shape: &[i64], last2: [&str; 2]| -> Vec<String> {
                let rs = shape.len();
                let mut idx: Vec<String> = (0..rs - 2)
                    .map(|d| {
                        if shape[d] == 1 {
                            "0".to_string()
                        } else {
                            all[r - rs + d].clone()
                        }
                    })
                    .collect();
                idx.extend(last2.iter().map(|s| s.to_string()));
                idx
            };
            let (mi, ni) = (all[r - 2].as_str(), all[r - 1].as_str());
            let ai = idx(as_, if ta { ["k0", mi] } else { [mi, "k0"] });
            let bi = idx(bs, if tb { [ni, "k0"] } else { ["k0", ni] });
            // A matrix-vector product reads each operand once, in any order; a larger one
            // reads them many times, and only in their own innermost order at full speed.
            let any_order = m == 1;
            let (an, ai) = self.through_transpose(a, as_, ai, "A", any_order);
            let (bn, bi) = if self.g.is_constant(b) {
                (self.weight(b, "B", bs), bi)
            } else {
                self.through_transpose(b, bs, bi, "B", any_order)
            };
            self.stmts.push(format!(
                "O[{}] += {an}[{}] * {bn}[{}] where {}, k0<{k}",
                list(&all),
                list(&ai),
                list(&bi),
                wheres(&v)
            ));
            let load = format!("O[{}]", list(&all));
            Anchor {
                logical: all,
                vars: v,
                value: load.clone(),
                core: load,
                flat: None,
            }
        };
        if let Some((c, beta)) = bias {
            let cs = self.g.need_shape(n, c)?;
            let (dims, idx) = self
                .broadcast(&cs, &anchor)
                .map_err(|e| ImportError::node(n, e))?;
            let cn = self.input(c, "C", &dims);
            let scaled = if beta == 1.0 {
                String::new()
            } else {
                format!("{} * ", num(beta))
            };
            anchor.value = format!("({} + {scaled}{cn}[{}])", anchor.value, list(&idx));
        }
        Ok(anchor)
    }

    /// An activation operand read at `idx`, through the `Transpose` that makes it when there
    /// is one: the transpose's input is declared instead, in its own shape, and read at the
    /// same point (`idx` permuted back). The copy the transpose was is then read by nothing
    /// and dropped from the build (`Program::prune`): attention's heads' splits, and a
    /// decoder step's `K^T`, cost no pass over memory (ONNX Runtime's transpose-into-MatMul
    /// fusion, TVM's `transpose_b`). Unless `any_order`, only a transpose that keeps the
    /// innermost axis is read through: a product over BERT's 128 tokens ran its `Q K^T` at a
    /// seventh of the speed reading the keys with the summed axis innermost
    /// (docs/experiments/2026-12-06-transposes-read-through.md).
    fn through_transpose(
        &mut self,
        t: &str,
        shape: &[i64],
        idx: Vec<String>,
        hint: &str,
        any_order: bool,
    ) -> (String, Vec<String>) {
        let g = self.g;
        let source = producer(g, t)
            .filter(|n| n.op == "Transpose")
            .and_then(|n| {
                let x = n.input(0)?;
                let xs = g.shape(x)?;
                let r = xs.len();
                let perm: Vec<usize> = match n.ints("perm") {
                    Some(p) => p
                        .iter()
                        .map(|&d| usize::try_from(d).ok())
                        .collect::<Option<_>>()?,
                    None => (0..r).rev().collect(),
                };
                // Axis `d` of the result is axis `perm[d]` of the input.
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                let valid = r == shape.len()
                    && sorted.iter().copied().eq(0..r)
                    && (0..r).all(|d| xs[perm[d]] == shape[d])
                    && (any_order || perm.last().is_some_and(|&l| l + 1 == r));
                (valid && g.is_float(x) && !g.is_constant(x)).then(|| (x, xs.to_vec(), perm))
            });
        match source {
            Some((x, xs, perm)) => {
                let mut read = vec![String::new(); idx.len()];
                for (d, i) in idx.into_iter().enumerate() {
                    read[perm[d]] = i;
                }
                (self.input(x, hint, &xs), read)
            }
            None => (self.input(t, hint, shape), idx),
        }
    }

    fn pads(n: &Node, spatial: usize) -> Vec<i64> {
        n.ints("pads").unwrap_or_else(|| vec![0; 2 * spatial])
    }

    /// A padding stage over `x` when the windows read outside it; returns what they read.
    /// With `nhwc`, `x` is read transposed to NHWC and the stage is NHWC too.
    fn padded(
        &mut self,
        x: &str,
        xs: &[i64],
        pads: &[i64],
        need: [i64; 2],
        fill: f64,
        nhwc: bool,
    ) -> String {
        let (pt, pl) = (pads[0], pads[1]);
        let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let (xn, rows, cols) = if nhwc {
            let key = Operand::Transposed {
                name: x.to_string(),
                perm: TO_NHWC.to_vec(),
            };
            (self.input_of(key, "X", &[n, h, w, c]), "i1", "i2")
        } else {
            (self.input(x, "X", xs), "i2", "i3")
        };
        if pt == 0 && pl == 0 && need[0] <= h && need[1] <= w {
            return xn;
        }
        let mut guard = vec![];
        if pt > 0 {
            guard.push(format!("{rows} >= {pt}"));
        }
        if need[0] > pt + h {
            guard.push(format!("{rows} < {}", pt + h));
        }
        if pl > 0 {
            guard.push(format!("{cols} >= {pl}"));
        }
        if need[1] > pl + w {
            guard.push(format!("{cols} < {}", pl + w));
        }
        let off = |v: &str, p: i64| {
            if p > 0 {
                format!("{v}-{p}")
            } else {
                v.to_string()
            }
        };
        let (y, x) = (off(rows, pt), off(cols, pl));
        let (read, dims) = if nhwc {
            (format!("{xn}[i0,{y},{x},i3]"), [n, need[0], need[1], c])
        } else {
            (format!("{xn}[i0,i1,{y},{x}]"), [n, c, need[0], need[1]])
        };
        let body = if guard.is_empty() {
            read
        } else {
            format!("select({}, {read}, {})", guard.join(" && "), num(fill))
        };
        self.stmts.push(format!(
            "P[i0,i1,i2,i3] = {body} where i0<{}, i1<{}, i2<{}, i3<{}",
            dims[0], dims[1], dims[2], dims[3]
        ));
        "P".into()
    }

    fn conv(&mut self, n: &Node, x: &str, xs: &[i64], out: &[i64]) -> Result<Anchor, ImportError> {
        let w = n
            .input(1)
            .ok_or_else(|| ImportError::node(n, "no kernel"))?;
        let ws = self.g.need_shape(n, w)?;
        if ws.len() != 4 {
            return Err(ImportError::node(n, "only 2-D convolutions are supported"));
        }
        let groups = n.int("group").unwrap_or(1);
        let (f, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
        let s = n.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let d = n.ints("dilations").unwrap_or_else(|| vec![1, 1]);
        let pads = Self::pads(n, 2);
        let (oh, ow) = (out[2], out[3]);
        let need = [
            (oh - 1) * s[0] + (kh - 1) * d[0] + 1,
            (ow - 1) * s[1] + (kw - 1) * d[1] + 1,
        ];
        if xs[1] != groups * cg || f % groups != 0 {
            return Err(ImportError::node(
                n,
                format!(
                    "{f} filters of {cg} channels do not split {} channels into {groups} groups",
                    xs[1]
                ),
            ));
        }
        let fg = f / groups;
        let tile = crate::winograd::tile(out[2], out[3]);
        if self.winograd
            && let Some(m) = tile
            && groups == 1
            && (kh, kw) == (3, 3)
            && s == [1, 1]
            && d == [1, 1]
            && pads == [1, 1, 1, 1]
            && out[0] == 1
            && self.g.is_constant(w)
        {
            return Ok(self.conv_winograd(n, x, xs, out, f, cg, m));
        }
        if self.nhwc && (groups == 1 || (fg == 1 && cg == 1)) && self.g.is_constant(w) {
            return self.conv_nhwc(n, x, xs, out, &ws, groups, need);
        }
        let src = self.padded(x, xs, &[pads[0], pads[1]], need, 0.0, false);
        let wn = self.weight(w, "W", &ws);
        let (v, logical, stmt) = if groups == 1 {
            let v = vars("i", out);
            let stmt = format!(
                "O[i0,i1,i2,i3] += {src}[i0,k0,{},{}] * {wn}[i1,k0,k1,k2] where {}, k0<{cg}, k1<{kh}, k2<{kw}",
                window("i2", s[0], "k1", d[0], 0),
                window("i3", s[1], "k2", d[1], 0),
                wheres(&v)
            );
            (v.clone(), names(&v), stmt)
        } else if fg == 1 && cg == 1 {
            // Depthwise, channel multiplier 1.
            let v = vars("i", out);
            let stmt = format!(
                "O[i0,i1,i2,i3] += {src}[i0,i1,{},{}] * {wn}[i1,0,k1,k2] where {}, k1<{kh}, k2<{kw}",
                window("i2", s[0], "k1", d[0], 0),
                window("i3", s[1], "k2", d[1], 0),
                wheres(&v)
            );
            (v.clone(), names(&v), stmt)
        } else {
            // Grouped: the output as [n, group, filter in group, y, x], the same memory.
            let v = vars("i", &[out[0], groups, fg, oh, ow]);
            let stmt = format!(
                "O[i0,i1,i2,i3,i4] += {src}[i0,i1*{cg}+k0,{},{}] * {wn}[i1*{fg}+i2,k0,k1,k2] where {}, k0<{cg}, k1<{kh}, k2<{kw}",
                window("i3", s[0], "k1", d[0], 0),
                window("i4", s[1], "k2", d[1], 0),
                wheres(&v)
            );
            let logical = vec!["i0".into(), format!("i1*{fg}+i2"), "i3".into(), "i4".into()];
            (v, logical, stmt)
        };
        self.stmts.push(stmt);
        Ok(self.conv_result(n, f, v, logical))
    }

    /// A convolution's result `O` as the epilogue reads it, its own bias (`f` of them) added
    /// by the channel's index.
    fn conv_result(
        &mut self,
        n: &Node,
        f: i64,
        vars: Vec<(String, i64)>,
        logical: Vec<String>,
    ) -> Anchor {
        let load = format!("O[{}]", list(&names(&vars)));
        // An integer convolution's input 2 is its data zero point (`integer`).
        let value = match n.input(2).filter(|_| n.op == "Conv") {
            Some(b) => {
                let bn = self.input(b, "B", &[f]);
                format!("({load} + {bn}[{}])", logical[1])
            }
            None => load.clone(),
        };
        Anchor {
            vars,
            logical,
            value,
            core: load,
            flat: None,
        }
    }

    /// A convolution (dense or depthwise) in NHWC: the data transposed to `[n,h,w,c]`, the
    /// weight to `[kh,kw,c,f]` (`[kh,kw,c,1]`), the result `[n,oh,ow,f]`.
    #[allow(clippy::too_many_arguments)]
    fn conv_nhwc(
        &mut self,
        n: &Node,
        x: &str,
        xs: &[i64],
        out: &[i64],
        ws: &[i64],
        groups: i64,
        need: [i64; 2],
    ) -> Result<Anchor, ImportError> {
        let w = n.input(1).unwrap_or_default();
        let (f, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
        let s = n.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let d = n.ints("dilations").unwrap_or_else(|| vec![1, 1]);
        let pads = Self::pads(n, 2);
        let src = self.padded(x, xs, &[pads[0], pads[1]], need, 0.0, true);
        let depthwise = groups != 1;
        let (wperm, wshape) = if depthwise {
            (vec![2, 3, 0, 1], vec![kh, kw, f, 1])
        } else {
            (vec![2, 3, 1, 0], vec![kh, kw, cg, f])
        };
        let key = Operand::Transposed {
            name: w.to_string(),
            perm: wperm,
        };
        let wn = self.input_of(key, "W", &wshape);
        if !self.layout_free.contains(&wn) {
            self.layout_free.push(wn.clone());
        }
        let (oh, ow) = (out[2], out[3]);
        let v = vars("i", &[out[0], oh, ow, f]);
        let (yy, xx) = (
            window("i1", s[0], "k1", d[0], 0),
            window("i2", s[1], "k2", d[1], 0),
        );
        let stmt = if depthwise {
            format!(
                "O[i0,i1,i2,i3] += {src}[i0,{yy},{xx},i3] * {wn}[k1,k2,i3,0] where {}, k1<{kh}, k2<{kw}",
                wheres(&v)
            )
        } else {
            format!(
                "O[i0,i1,i2,i3] += {src}[i0,{yy},{xx},k0] * {wn}[k1,k2,k0,i3] where {}, k1<{kh}, k2<{kw}, k0<{cg}",
                wheres(&v)
            )
        };
        self.stmts.push(stmt);
        self.nhwc_out = Some(out.to_vec());
        let logical = NHWC_LOGICAL.map(String::from).to_vec();
        Ok(self.conv_result(n, f, v, logical))
    }

    /// A 3x3 stride-1 convolution padded by 1 as F(m x m, 3 x 3) (`crate::winograd`): its
    /// input transform and the batched product are `pre` workloads, and this group's own is
    /// the output transform, written over `[n, tile row, row in tile, tile column, column in
    /// tile, channel]`, the same memory as NHWC `[n, h, w, c]`.
    #[allow(clippy::too_many_arguments)]
    fn conv_winograd(
        &mut self,
        n: &Node,
        x: &str,
        xs: &[i64],
        out: &[i64],
        f: i64,
        c: i64,
        m: i64,
    ) -> Anchor {
        use crate::winograd::{matrices, transform};
        let w = n.input(1).unwrap_or_default();
        let mats = matrices(m);
        let alpha = m + 2;
        let (th, tw) = (out[2] / m, out[3] / m);
        let base = &n.outputs[0];
        let (vt, mt) = (format!("{base}.winograd_v"), format!("{base}.winograd_m"));
        // The input transform: V[e, u, tile row, tile column, c] = (B^T d B)[e, u].
        let mut pre = Gen::plain(self.g, Layout::Nhwc);
        let need = [(th - 1) * m + alpha, (tw - 1) * m + alpha];
        let p = pre.padded(x, xs, &[1, 1], need, 0.0, true);
        let body = transform(&mats.bt, "i0", "i1", |i, j| {
            format!("{p}[0,i2*{m}+{i},i3*{m}+{j},i4]")
        });
        pre.stmts.push(format!(
            "V[i0,i1,i2,i3,i4] = {body} where i0<{alpha}, i1<{alpha}, i2<{th}, i3<{tw}, i4<{c}"
        ));
        let expr = pre.program();
        let (b, tiles) = (alpha * alpha, th * tw);
        self.pre.push(Pre {
            expr,
            spec: None,
            operands: pre.inputs,
            layout_free: vec![],
            output: vt.clone(),
            shape: vec![b, tiles, c],
        });
        // The product of each point's tiles by the transformed weight, packed once.
        let spec = format!("batch_matmul(b={b},m={tiles},n={f},k={c},layout_free=B)");
        self.pre.push(Pre {
            expr: format!(
                "input A[{b},{tiles},{c}]\ninput B[{b},{c},{f}]\nC[i,j,l] += A[i,j,k] * B[i,k,l] where i<{b}, j<{tiles}, l<{f}, k<{c}"
            ),
            spec: Some(
                tunehub_engine::ops::OpSpec::parse(&spec).expect("a valid batch_matmul spec"),
            ),
            operands: vec![
                ("A".into(), Operand::tensor(&vt)),
                (
                    "B".into(),
                    Operand::Winograd {
                        weight: w.to_string(),
                        m,
                    },
                ),
            ],
            layout_free: vec!["B".into()],
            output: mt.clone(),
            shape: vec![b, tiles, f],
        });
        // The output transform: O[n, tile row, a, tile column, b, f] = (A^T M A)[a, b].
        let mn = self.input(&mt, "M", &[b, tiles, f]);
        let body = transform(&mats.at, "i2", "i4", |e, u| {
            format!("{mn}[{},i1*{tw}+i3,i5]", e as i64 * alpha + u as i64)
        });
        let v = vec![
            ("i0".to_string(), out[0]),
            ("i1".to_string(), th),
            ("i2".to_string(), m),
            ("i3".to_string(), tw),
            ("i4".to_string(), m),
            ("i5".to_string(), f),
        ];
        self.stmts.push(format!(
            "O[i0,i1,i2,i3,i4,i5] = {body} where {}",
            wheres(&v)
        ));
        self.nhwc_out = Some(out.to_vec());
        let (y, x) = (format!("i1*{m}+i2"), format!("i3*{m}+i4"));
        self.nhwc_index = Some(vec!["i0".into(), y.clone(), x.clone(), "i5".into()]);
        let logical = vec!["i0".into(), "i5".into(), y, x];
        self.conv_result(n, f, v, logical)
    }

    fn pool(&mut self, n: &Node, x: &str, xs: &[i64], out: &[i64]) -> Result<Anchor, ImportError> {
        let k = n
            .ints("kernel_shape")
            .filter(|k| k.len() == 2)
            .ok_or_else(|| ImportError::node(n, "no 2-D kernel_shape"))?;
        let s = n.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let d = n.ints("dilations").unwrap_or_else(|| vec![1, 1]);
        let pads = Self::pads(n, 2);
        let need = [
            (out[2] - 1) * s[0] + (k[0] - 1) * d[0] + 1,
            (out[3] - 1) * s[1] + (k[1] - 1) * d[1] + 1,
        ];
        let max = n.op == "MaxPool";
        // The most negative f32 stands for -infinity, which the text form has no literal for.
        let fill = if max { -3.4028234663852886e38 } else { 0.0 };
        let nhwc = self.nhwc;
        let src = self.padded(x, xs, &[pads[0], pads[1]], need, fill, nhwc);
        let op = if max { "max=" } else { "+=" };
        let (v, read, logical) = if nhwc {
            self.nhwc_out = Some(out.to_vec());
            let read = format!(
                "{src}[i0,{},{},i3]",
                window("i1", s[0], "k1", d[0], 0),
                window("i2", s[1], "k2", d[1], 0)
            );
            (
                vars("i", &[out[0], out[2], out[3], out[1]]),
                read,
                NHWC_LOGICAL,
            )
        } else {
            let read = format!(
                "{src}[i0,i1,{},{}]",
                window("i2", s[0], "k1", d[0], 0),
                window("i3", s[1], "k2", d[1], 0)
            );
            (vars("i", out), read, ["i0", "i1", "i2", "i3"])
        };
        self.stmts.push(format!(
            "O[i0,i1,i2,i3] {op} {read} where {}, k1<{}, k2<{}",
            wheres(&v),
            k[0],
            k[1]
        ));
        let load = "O[i0,i1,i2,i3]".to_string();
        // Average pooling divides by the window's size, padding included: the same work as
        // ONNX's default (count_include_pad=0) at the borders, slightly other values there.
        let value = if max {
            load
        } else {
            format!("{load} * {}", num(1.0 / (k[0] * k[1]) as f64))
        };
        Ok(Anchor {
            logical: logical.map(String::from).to_vec(),
            vars: v,
            value: value.clone(),
            core: value,
            flat: None,
        })
    }
}
