//! Values for a model's dynamic input dimensions (`--batch N`, `--shape NAME=1x3x224x224`),
//! written into the graph's inputs before tract infers every other shape from them.

use crate::error::ImportError;
use tract_onnx::pb;

/// The dimensions the user fixes.
#[derive(Debug, Clone, Default)]
pub struct InputShapes {
    /// The first dimension of every input whose first dimension is dynamic.
    pub batch: Option<i64>,
    /// Whole shapes by input name; they win over `batch`.
    pub shapes: Vec<(String, Vec<i64>)>,
}

impl InputShapes {
    /// Parses `NAME=1x3x224x224` (the command line's `--shape`).
    pub fn parse_shape(arg: &str) -> Result<(String, Vec<i64>), String> {
        let (name, dims) = arg
            .split_once('=')
            .ok_or_else(|| format!("'{arg}': expected NAME=D0xD1x..."))?;
        let dims = dims
            .split('x')
            .map(|d| match d.trim().parse::<i64>() {
                Ok(v) if v > 0 => Ok(v),
                _ => Err(format!("'{arg}': '{d}' is not a positive dimension")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if name.is_empty() {
            return Err(format!("'{arg}': no input name"));
        }
        Ok((name.to_string(), dims))
    }

    /// Fixes every input dimension of `graph` (inputs that are initializers are constants and
    /// keep theirs); a dynamic one left without a value is an error naming it.
    pub(crate) fn apply(&self, graph: &mut pb::GraphProto) -> Result<(), ImportError> {
        use pb::tensor_shape_proto::dimension::Value;
        let constants: std::collections::HashSet<&str> =
            graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs: Vec<String> = graph
            .input
            .iter()
            .filter(|i| !constants.contains(i.name.as_str()))
            .map(|i| i.name.clone())
            .collect();
        for (name, _) in &self.shapes {
            if !inputs.contains(name) {
                return Err(ImportError::BadShape {
                    name: name.clone(),
                    msg: format!(
                        "the model has no such input (inputs: {})",
                        inputs.join(", ")
                    ),
                });
            }
        }
        for input in graph.input.iter_mut() {
            if constants.contains(input.name.as_str()) {
                continue;
            }
            let Some(pb::type_proto::Value::TensorType(tt)) =
                input.r#type.as_mut().and_then(|t| t.value.as_mut())
            else {
                continue;
            };
            let given = self.shapes.iter().find(|(n, _)| *n == input.name);
            let shape = tt.shape.get_or_insert_with(Default::default);
            if let Some((_, dims)) = given {
                if !shape.dim.is_empty() && shape.dim.len() != dims.len() {
                    return Err(ImportError::BadShape {
                        name: input.name.clone(),
                        msg: format!(
                            "{} dimensions given, the input has {}",
                            dims.len(),
                            shape.dim.len()
                        ),
                    });
                }
                shape.dim = dims
                    .iter()
                    .map(|&d| pb::tensor_shape_proto::Dimension {
                        value: Some(Value::DimValue(d)),
                        ..Default::default()
                    })
                    .collect();
                continue;
            }
            for (i, d) in shape.dim.iter_mut().enumerate() {
                let fixed = match &d.value {
                    Some(Value::DimValue(v)) if *v > 0 => continue,
                    Some(Value::DimValue(v)) => Some(*v),
                    _ => None,
                };
                if let (Some(b), 0) = (self.batch, i) {
                    d.value = Some(Value::DimValue(b));
                    continue;
                }
                // A 0 is not dynamic: said as what it is, so that the user looks at the export.
                return Err(match (fixed, &d.value) {
                    (Some(value), _) => ImportError::NotASize {
                        input: input.name.clone(),
                        dim: i,
                        value,
                        batch_hint: if i == 0 { " or --batch N" } else { "" },
                    },
                    (None, value) => ImportError::DynamicDim {
                        input: input.name.clone(),
                        dim: i,
                        param: match value {
                            Some(Value::DimParam(p)) => p.clone(),
                            _ => "?".into(),
                        },
                    },
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_arguments_parse_or_say_why_not() {
        assert_eq!(
            InputShapes::parse_shape("x=1x3x224x224").unwrap(),
            ("x".to_string(), vec![1, 3, 224, 224])
        );
        assert!(InputShapes::parse_shape("x").unwrap_err().contains("NAME="));
        assert!(
            InputShapes::parse_shape("x=1x0")
                .unwrap_err()
                .contains("'0'")
        );
        assert!(
            InputShapes::parse_shape("=1")
                .unwrap_err()
                .contains("no input name")
        );
    }
}
