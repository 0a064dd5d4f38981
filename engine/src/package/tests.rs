use super::*;
use crate::ops;

fn matmul_task(layout_free: bool) -> Task {
    let t = Task::new(ops::matmul(8, 8, 8).unwrap(), "matmul(8,8,8)");
    if layout_free {
        t.with_layout_free(&["B"]).unwrap()
    } else {
        t
    }
}

fn provenance(task: &Task, target: &Target) -> Provenance {
    Provenance {
        record_id: "r1".into(),
        workload_key: task.key.clone(),
        target_key: target.key(),
        description: task.desc.clone(),
        gflops: 1.5,
    }
}

#[test]
fn symbols_are_c_identifiers_unique_per_workload_and_target() {
    let a = symbol_for(
        "",
        "matmul(8,8,8)",
        "0123456789abcdef",
        "x86_64-avx2-c2-1a2b3c4d",
    )
    .unwrap();
    assert_eq!(a, "tunehub_matmul_0123456789_1a2b3c4d");
    let b = symbol_for(
        "",
        "matmul(8,8,8)",
        "0123456789abcdef",
        "x86_64-avx2-c2-99999999",
    )
    .unwrap();
    assert_ne!(a, b);
    let t = symbol_for("my_", "C[i] = A[i] where i<8", "ffff", "t-1").unwrap();
    assert_eq!(t, "my_expr_ffff_1");
    for bad in ["9x", "a-b", "a b", &"x".repeat(65)] {
        let e = symbol_for(bad, "matmul(8,8,8)", "k", "t").unwrap_err();
        assert!(e.to_string().contains("not a C identifier"), "{e}");
    }
}

#[test]
fn a_kernel_names_its_functions_and_describes_its_arguments() {
    let target = Target::detect();
    let task = matmul_task(true);
    let k = kernel(
        &task,
        &Schedule::default(),
        &target,
        provenance(&task, &target),
        "",
    )
    .unwrap();
    assert!(k.source.contains(&format!("void {}(", k.symbol)));
    assert!(!k.source.contains(codegen::KERNEL_NAME), "{}", k.source);
    assert!(
        k.source
            .contains(&format!("void {}(int n)", k.set_num_threads))
    );
    let roles: Vec<Role> = k.args.iter().map(|a| a.role).collect();
    assert_eq!(roles, [Role::Input, Role::Weight, Role::Output]);
    let b = &k.args[1];
    let f = b.pack_function.as_ref().expect("B is read packed");
    assert_eq!(f, &format!("{}_pack_B", k.symbol));
    assert!(k.source.contains(&format!("void {f}(")));
    assert_eq!(b.packed_elements.map(|n| n >= 64), Some(true));
    assert_eq!(
        (b.shape.clone(), b.strides.clone()),
        (vec![8, 8], vec![8, 1])
    );
    assert!(k.args.iter().all(|a| a.alignment == ALIGNMENT));
    assert!(k.header.contains("extern \"C\"") && k.header.contains(f));
    assert!(k.header.contains("record r1"));
    assert_eq!(k.cflags, target.compile_flags());
    assert!(k.ldflags.contains(&"-fopenmp".to_string()));
    assert_eq!(k.threads as usize, target.cores.max(1));

    // Without layout-free inputs every input is row-major and nothing is packed.
    let plain = matmul_task(false);
    let k = kernel(
        &plain,
        &Schedule::default(),
        &target,
        provenance(&plain, &target),
        "",
    )
    .unwrap();
    assert!(
        k.args
            .iter()
            .all(|a| a.pack_function.is_none() && a.layout == "row-major")
    );
    assert_eq!(k.args[1].role, Role::Input);
}

#[test]
fn a_pack_holds_each_kernel_once_and_one_target_only() {
    let target = Target::detect();
    let t1 = matmul_task(true);
    let t2 = Task::new(ops::matmul(4, 8, 8).unwrap(), "matmul(4,8,8)");
    let k1 = kernel(
        &t1,
        &Schedule::default(),
        &target,
        provenance(&t1, &target),
        "",
    )
    .unwrap();
    let k2 = kernel(
        &t2,
        &Schedule::default(),
        &target,
        provenance(&t2, &target),
        "",
    )
    .unwrap();
    let p = pack("nets", &[k1.clone(), k2.clone(), k1.clone()]).unwrap();
    assert_eq!(p.source.matches(&format!("void {}(", k1.symbol)).count(), 1);
    assert!(p.source.contains("#include \"nets.h\""));
    assert!(p.header.contains("#ifndef NETS_H"));
    let m: serde_json::Value = serde_json::from_str(&p.manifest_json).unwrap();
    assert_eq!(m["kernels"].as_array().unwrap().len(), 2);
    assert_eq!(m["target_key"], target.key());

    let mut other = k2.clone();
    other.provenance.target_key = "aarch64-neon-c4-00000000".into();
    let e = pack("nets", &[k1.clone(), other]).unwrap_err();
    assert!(e.to_string().contains("one target"), "{e}");
    assert!(pack("bad-name", &[k1]).is_err());
    assert!(pack("empty", &[]).is_err());
}
