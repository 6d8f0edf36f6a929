//! `finished-runs NAMESPACE LARGEST SOAK DEMO`: fills NAMESPACE (which must exist) with that
//! many finished BenchmarkRuns of each status size (`msgbench_e2e::history`), for
//! `bench/operator/run`. Prints the bytes of status written.
use anyhow::{bail, Context, Result};
use msgbench_e2e::history::{fill, Mix};

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ns, largest, soak, demo] = args.as_slice() else {
        bail!("usage: finished-runs NAMESPACE LARGEST SOAK DEMO");
    };
    let n = |s: &String| {
        s.parse::<usize>()
            .with_context(|| format!("{s}: not a count"))
    };
    let mix = Mix {
        largest: n(largest)?,
        soak: n(soak)?,
        demo: n(demo)?,
    };
    let client = msgbench_e2e::cluster::client().await?;
    let bytes = fill(&client, ns, mix).await?;
    println!("{bytes}");
    Ok(())
}
