//! A report as a person sees it: rendered by headless Chromium (Debian's `chromium`) into a PNG,
//! with the DOM Chromium built and whatever the page logged. `report --screenshot` uses it for
//! CI artifacts; the tests use it to prove the page renders, shows its plots and logs nothing.
use anyhow::{bail, ensure, Context, Result};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};

/// Window size of `report --screenshot`: the whole report of a two-variant run.
pub const SCREENSHOT_SIZE: (u32, u32) = (1280, 2600);

/// What Chromium made of a page.
pub struct Rendered {
    pub png: Vec<u8>,
    /// The DOM after loading (`--dump-dom`).
    pub dom: String,
    /// Console messages and errors about the page (Chromium's own D-Bus/GPU noise excluded).
    pub problems: Vec<String>,
}

/// Renders `html` at `size` (width, height) in a fresh profile; fails when `chromium` is missing,
/// fails or hangs (2 minutes).
pub fn render(html: &str, size: (u32, u32)) -> Result<Rendered> {
    let found = Command::new("chromium").arg("--version").output();
    ensure!(
        found.is_ok_and(|o| o.status.success()),
        "chromium is not on PATH: install Debian's chromium (`e2e/tools/ensure apt:chromium`)"
    );
    let dir = tempfile::tempdir().context("temporary directory")?;
    let page = dir.path().join("report.html");
    std::fs::write(&page, html).context("writing the page")?;
    let png = dir.path().join("shot.png");
    let shot = chromium(
        &page,
        &dir.path().join("p1"),
        &[
            &format!("--screenshot={}", png.display()),
            &format!("--window-size={},{}", size.0, size.1),
        ],
    )?;
    let dom = chromium(&page, &dir.path().join("p2"), &["--dump-dom"])?;
    let mut problems = page_problems(&shot.stderr, &page);
    problems.extend(page_problems(&dom.stderr, &page));
    Ok(Rendered {
        png: std::fs::read(&png).with_context(|| format!("no screenshot {}", png.display()))?,
        dom: String::from_utf8_lossy(&dom.stdout).into_owned(),
        problems,
    })
}

fn chromium(page: &Path, profile: &Path, extra: &[&str]) -> Result<Output> {
    // `timeout`: a hung browser fails instead of hanging its caller.
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args(["--enable-logging=stderr", "--v=0", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .context("running chromium")?;
    if !out.status.success() {
        bail!(
            "chromium failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

fn page_problems(stderr: &[u8], page: &Path) -> Vec<String> {
    let name = page
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || (l.contains("ERROR") && l.contains(&name)))
        .map(String::from)
        .collect()
}

/// A screenshot's width, height, number of distinct colours and share of non-white pixels:
/// a page with its plots has hundreds of shades; a blank or failed one a handful.
pub struct Ink {
    pub width: u32,
    pub height: u32,
    pub colours: usize,
    pub inked: f64,
}

pub fn ink(png_bytes: &[u8]) -> Result<Ink> {
    let mut dec = png::Decoder::new(std::io::Cursor::new(png_bytes))
        .read_info()
        .context("screenshot is not a PNG")?;
    let mut buf = vec![0; dec.output_buffer_size().context("PNG size")?];
    let info = dec.next_frame(&mut buf).context("PNG frame")?;
    let step = info.color_type.samples();
    ensure!(
        step >= 3,
        "colour screenshot expected, got {:?}",
        info.color_type
    );
    let px: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let inked = px.iter().filter(|p| **p != [255, 255, 255]).count() as f64 / px.len() as f64;
    Ok(Ink {
        width: info.width,
        height: info.height,
        colours: px.into_iter().collect::<HashSet<_>>().len(),
        inked,
    })
}

/// Renders and refuses a page that logged problems or came out blank.
pub fn screenshot_checked(html: &str, size: (u32, u32)) -> Result<Vec<u8>> {
    let r = render(html, size)?;
    ensure!(r.problems.is_empty(), "the page logged: {:?}", r.problems);
    let ink = ink(&r.png)?;
    ensure!(
        ink.colours > 200 && ink.inked > 0.03,
        "the screenshot looks blank ({} colours, {:.1} % inked)",
        ink.colours,
        ink.inked * 100.0
    );
    Ok(r.png)
}
