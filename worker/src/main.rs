//! `tunehub-worker`: measures candidates on a target device for a tunehub server. The fleet
//! protocol lands with the worker issue; today the binary prints the device it would register.

fn main() {
    let target = tunehub_engine::target::Target::detect();
    println!(
        "{}",
        serde_json::to_string_pretty(&target).expect("a target serializes")
    );
}
