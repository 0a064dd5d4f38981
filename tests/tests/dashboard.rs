//! The web dashboard in a real browser: headless Chromium (Debian's `chromium`, driven over the
//! DevTools protocol) against a real `tunehub server --http` with real worker processes, one of
//! them with a compiler that fails every build. Assertions read the page's DOM (the ids and
//! `data-*` attributes `server/src/dashboard/assets/app.js` writes), never pixels; screenshots
//! go to the test's temporary directory.

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::{Page, ScreenshotParams};
use std::path::Path;
use std::time::Duration;
use tokio_stream::StreamExt;
use tunehub_proto::v1 as pb;
use tunehub_tests::{
    Server, TOKEN, Worker, broken_compiler, get, quick, sqlite_path, submit, task, tools, wait,
    wait_pool,
};

/// A `viewer` token: it looks, it cannot cancel.
const VIEWER: &str = "viewer-secret";

/// The workers' own pool, apart from the server's machine.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_DASHBOARD_TEST";

/// How long a page may take to show what the server already holds (the page polls every 2 s).
const SHOWN: Duration = Duration::from_secs(30);

/// The value of a JavaScript expression on the page (JSON: a string, number, bool or null).
async fn js(page: &Page, expr: &str) -> serde_json::Value {
    page.evaluate(expr)
        .await
        .unwrap_or_else(|e| panic!("evaluating {expr}: {e}"))
        .into_value()
        .unwrap_or(serde_json::Value::Null)
}

/// Waits until `expr` is truthy on the page; its value. On a timeout the failure shows what
/// the page showed.
async fn until_shown(page: &Page, what: &str, expr: &str) -> serde_json::Value {
    let start = std::time::Instant::now();
    loop {
        let v = js(page, expr).await;
        let falsy = matches!(&v, serde_json::Value::Null | serde_json::Value::Bool(false))
            || v == serde_json::json!(0)
            || v == serde_json::json!("");
        if !falsy {
            return v;
        }
        if start.elapsed() > SHOWN {
            let text = js(page, "document.body.innerText").await;
            panic!("not within {SHOWN:?}: {what} ({expr}); the page shows:\n{text}");
        }
        // Spaces the looks out; the page's own polling is what brings the change.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `cmd`'s path through PATH (the browser launcher wants a path, not a name).
fn on_path(cmd: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{cmd} is not on PATH"))
}

/// Under the test's temporary directory, or TUNEHUB_TEST_SCREENSHOTS (a directory to keep
/// them in, to look at).
async fn screenshot(page: &Page, dir: &Path, name: &str) {
    let dir = std::env::var_os("TUNEHUB_TEST_SCREENSHOTS").map_or(dir.to_path_buf(), Into::into);
    let path = dir.join(format!("{name}.png"));
    page.save_screenshot(ScreenshotParams::builder().full_page(true).build(), &path)
        .await
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
}

/// Signs in with `token` through the page's form (signing out first if signed in).
async fn sign_in(page: &Page, token: &str) {
    js(
        page,
        "(() => { const b = document.getElementById('signout'); if (!b.hidden) b.click(); \
         return true; })()",
    )
    .await;
    until_shown(
        page,
        "the sign-in form",
        "!document.getElementById('login').hidden",
    )
    .await;
    page.find_element("#token")
        .await
        .unwrap()
        .click()
        .await
        .unwrap()
        .type_str(token)
        .await
        .unwrap();
    page.find_element("#login-button")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until_shown(
        page,
        "signed in",
        "document.getElementById('login').hidden && document.getElementById('whoami').textContent",
    )
    .await;
}

async fn go(page: &Page, hash: &str) {
    js(
        page,
        &format!("location.hash = {}; true", serde_json::json!(hash)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_job_and_the_fleet_and_a_viewer_cannot_cancel() {
    if !tools::require("the dashboard's browser test", &["chromium"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("tokens.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[server.api_tokens]]\nname = \"wall\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n"
        ),
    )
    .unwrap();
    let server = Server::on(&sqlite_path(dir.path(), "dash.db"), "s1")
        .args(&["--config", cfg.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .start();
    let url = server.dashboard.clone().expect("the dashboard's URL");

    // A worker whose compiler fails every build: quarantined at its first piece, the job waits.
    let broken = broken_compiler(dir.path());
    let cc = format!("--compiler={}", broken.display());
    let _bad = Worker::start(&server.url(), "bad-board", &[FLEET_CFLAGS, &cc]);
    let mut c = server.client().await;
    let key = wait_pool(&mut c).await;
    let trials = 8;
    let mut req = tunehub_tests::submit_req(vec![task("matmul(16,16,8)", trials)], 2);
    req.target = key.clone();
    req.measure = Some(quick());
    req.name = "dash-job".into();
    let job = submit(&mut c, req).await.id;
    wait::until(
        "the job waits on the quarantined worker",
        SHOWN,
        async || {
            let j = get(&mut c, &job).await;
            j.waiting.contains("quarantined").then_some(())
        },
    )
    .await;

    let browser_dir = dir.path().join("chromium");
    let config = BrowserConfig::builder()
        .chrome_executable(on_path("chromium"))
        .user_data_dir(&browser_dir)
        // Root in CI: Chromium's sandbox needs user namespaces it may not have there; the
        // browser only visits this test's loopback server.
        .no_sandbox()
        .arg("--disable-gpu")
        .arg("--disable-dev-shm-usage")
        .window_size(1400, 1000)
        .build()
        .expect("a browser config");
    let (mut browser, mut handler) = Browser::launch(config).await.expect("chromium starts");
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page(url.as_str()).await.expect("a page");

    // Without a token: the sign-in form, nothing else.
    until_shown(
        &page,
        "the sign-in form",
        "!document.getElementById('login').hidden",
    )
    .await;
    assert_eq!(
        js(&page, "document.querySelectorAll('#view *').length").await,
        serde_json::json!(0)
    );

    // The viewer: the job is listed, its page has no cancel button and the endpoint refuses.
    sign_in(&page, VIEWER).await;
    assert_eq!(
        js(&page, "document.getElementById('whoami').textContent").await,
        serde_json::json!("wall (viewer)")
    );
    let row = format!("document.querySelector('#jobs tr[data-job=\"{job}\"]')");
    until_shown(&page, "the job's row", &row).await;
    assert_eq!(
        js(&page, &format!("{row}.children[1].textContent")).await,
        serde_json::json!("dash-job")
    );
    screenshot(&page, dir.path(), "jobs").await;
    go(&page, &format!("#/job/{job}")).await;
    until_shown(
        &page,
        "the job's page",
        &format!("document.getElementById('job-id')?.textContent === '{job}'"),
    )
    .await;
    until_shown(
        &page,
        "no successful trial yet",
        "document.querySelector('#curve-trials text.empty')",
    )
    .await;
    assert_eq!(
        js(&page, "document.getElementById('cancel') === null").await,
        serde_json::json!(true),
        "a viewer is offered no cancel"
    );
    let refused = js(
        &page,
        &format!(
            "fetch('/api/jobs/{job}/cancel', {{method: 'POST', headers: {{Authorization: \
             'Bearer {VIEWER}'}}}}).then(async r => r.status + ' ' + (await r.json()).error)"
        ),
    )
    .await;
    let refused = refused.as_str().unwrap_or_default().to_string();
    assert!(
        refused.starts_with("403 ") && refused.contains("viewer role"),
        "{refused}"
    );
    let state = get(&mut c, &job).await.state;
    assert!(
        state == pb::JobState::Running as i32 || state == pb::JobState::Queued as i32,
        "the viewer's cancel changed nothing: {state}"
    );

    // The fleet: the quarantined worker and why.
    go(&page, "#/fleet").await;
    let reason = until_shown(
        &page,
        "the quarantined worker's reason",
        "document.querySelector('#workers tr[data-status=\"quarantined\"] td.reason')?.textContent",
    )
    .await;
    assert!(
        reason.as_str().unwrap().contains("compile_error"),
        "{reason}"
    );
    screenshot(&page, dir.path(), "fleet").await;

    // An admin is offered the cancel button; a working worker comes, and the open page's
    // curve gains its points as the job measures, without a reload.
    sign_in(&page, TOKEN).await;
    go(&page, &format!("#/job/{job}")).await;
    until_shown(
        &page,
        "the cancel button",
        "document.getElementById('cancel')",
    )
    .await;
    let loads = js(
        &page,
        "Number(document.getElementById('view').dataset.loaded)",
    )
    .await;
    let _good = Worker::start(&server.url(), "good-board", &[FLEET_CFLAGS]);
    let points = "Number(document.querySelector('#curve-trials polyline[data-task=\"0\"]')\
                  ?.dataset.points || 0)";
    let first = until_shown(&page, "the curve's first points", points).await;
    until_shown(
        &page,
        "the job done",
        "document.querySelector('dd[data-fact=\"state\"]')?.textContent === 'done'",
    )
    .await;
    let last = js(&page, points).await;
    let ok = get(&mut c, &job).await.tasks[0].ok;
    assert!(
        first.as_u64().unwrap() >= 1 && last.as_u64().unwrap() >= first.as_u64().unwrap(),
        "{first} then {last}"
    );
    assert!(
        last.as_u64().unwrap() <= u64::from(trials) && ok >= 1,
        "{last} of {ok}"
    );
    assert!(
        js(
            &page,
            "Number(document.getElementById('view').dataset.loaded)"
        )
        .await
        .as_f64()
        .unwrap()
            > loads.as_f64().unwrap(),
        "the page polled"
    );
    assert_eq!(
        js(
            &page,
            "document.querySelector('#tasks tr[data-task=\"0\"]').children[3].textContent.trim()"
        )
        .await,
        serde_json::json!(format!("{trials}/{trials}"))
    );
    screenshot(&page, dir.path(), "job").await;

    // The records: the tuned workload, and its kernel's C and contract.
    go(&page, "#/records").await;
    let link = until_shown(
        &page,
        "the tuned workload",
        &format!(
            "[...document.querySelectorAll('#records tr')].find(r => r.textContent.includes('{key}'.slice(0, 20)))\
             ?.querySelector('a')?.getAttribute('href')"
        ),
    )
    .await;
    go(&page, link.as_str().unwrap()).await;
    let source = until_shown(
        &page,
        "the kernel's source",
        "document.getElementById('kernel-source')?.textContent",
    )
    .await;
    assert!(source.as_str().unwrap().contains("void "), "{source}");
    let args = js(&page, "document.querySelectorAll('#args tbody tr').length").await;
    assert_eq!(args, serde_json::json!(3), "A, B and the output");
    screenshot(&page, dir.path(), "kernel").await;

    browser.close().await.expect("chromium closes");
    let _ = browser.wait().await;
    events.abort();
}
