//! A model's kernels from the service, as a compiler asks for them: one `BestBatch` call for
//! every task, a tuned record where one exists, else a zero-shot answer from tuned neighbours
//! of the same structure; each converted to the engine's `Kernel` (what `tunehub-compiler`
//! takes) and checked on the way in. `tunehub build` and the network benchmark use it.

use crate::client::Clients;
use crate::usage::{UsageError, status_error};
use anyhow::{Result, bail};
use tunehub_engine::package::{Kernel, KernelArg, Provenance, Role};
use tunehub_onnx::TaskList;
use tunehub_proto::v1 as pb;

/// Every task's kernel on `target`, named under `prefix`; a task with neither a record nor a
/// tuned neighbour is an error (bad input, exit 2) listing every such task.
pub async fn best_kernels(
    clients: &mut Clients,
    list: &TaskList,
    target: &str,
    prefix: &str,
) -> Result<Vec<Kernel>> {
    let workloads: Vec<pb::Workload> = list
        .tasks
        .iter()
        .map(crate::workload::of_net_task)
        .collect();
    let results = clients
        .query
        .best_batch(pb::BestBatchRequest {
            workloads,
            target: target.to_string(),
            allow_transfer: true,
            symbol_prefix: prefix.to_string(),
            ..Default::default()
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .results;
    if results.len() != list.tasks.len() {
        bail!(
            "the service answered {} of {} tasks",
            results.len(),
            list.tasks.len()
        );
    }
    let missing: Vec<String> = list
        .tasks
        .iter()
        .zip(&results)
        .enumerate()
        .filter(|(_, (_, r))| !r.found || r.kernel.is_none())
        .map(|(i, (t, _))| format!("task {i} ({})", t.label))
        .collect();
    if !missing.is_empty() {
        return Err(UsageError(format!(
            "no record and no tuned neighbour of the same structure on target {target} for: {}; \
             tune them first (--tune N)",
            missing.join("; ")
        ))
        .into());
    }
    results
        .into_iter()
        .map(|r| kernel_of(r.kernel.expect("checked above")))
        .collect()
}

/// The service's kernel as the compiler takes it, checked: every role and layout known.
fn kernel_of(k: pb::Kernel) -> Result<Kernel> {
    let args = k
        .args
        .into_iter()
        .map(|a| {
            let role = match a.role.as_str() {
                "input" => Role::Input,
                "weight" => Role::Weight,
                "output" => Role::Output,
                r => bail!(
                    "kernel {}: argument {} has the unknown role '{r}'",
                    k.symbol,
                    a.name
                ),
            };
            if a.dtype != "float32" {
                bail!(
                    "kernel {}: argument {} is {}, not float32",
                    k.symbol,
                    a.name,
                    a.dtype
                );
            }
            let packed = !a.pack_function.is_empty();
            Ok(KernelArg {
                name: a.name,
                role,
                dtype: "float32",
                shape: a.shape,
                strides: a.strides,
                alignment: a.alignment,
                pack_function: packed.then_some(a.pack_function),
                packed_elements: packed
                    .then(|| i64::try_from(a.packed_elements).unwrap_or(i64::MAX)),
                layout: if packed { "packed" } else { "row-major" },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Kernel {
        symbol: k.symbol,
        source: k.source,
        header: k.header,
        args,
        cflags: k.cflags,
        ldflags: k.ldflags,
        compiler: k.compiler,
        compiler_version: k.compiler_version,
        threads: k.threads,
        set_num_threads: k.set_num_threads,
        provenance: Provenance {
            record_id: k.record_id,
            workload_key: k.workload_key,
            target_key: k.target_key,
            description: k.description,
            gflops: k.gflops,
        },
    })
}
