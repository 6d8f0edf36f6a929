//! Names a run shares with every other run on its server, whatever its run id: an existing
//! stream (`jetstream.createStream: false` keeps the name and subjects it was given), the
//! Socket.IO wildcard room (`socketio.allRoom`), and a WebSocket broadcast (the server sends
//! every message to every connection). Runs on one target take turns, so this matters only
//! where runs share a target by request (`spec.shareTarget`): then the others' messages reach
//! this run's subscribers. They are counted as `result.foreign`, never as deliveries, but the
//! server's and the subscribers' work includes them, so the run says so (condition
//! `NamesShared`). Pure.
use msgbench_crds::benchmark_run::BenchmarkRunSpec;
use msgbench_crds::workload::{Protocol, WebSocketMode, Workload};
use std::collections::BTreeSet;

/// What of `w` any other run on the server also uses, as the spec names it.
pub fn of_workload(w: &Workload) -> Vec<String> {
    let mut shared = Vec::new();
    match w.protocol {
        Protocol::Jetstream => {
            if let Some(js) = w.jetstream.as_ref().filter(|js| !js.create_stream) {
                shared.push(format!(
                    "stream {} (jetstream.createStream: false keeps its name and subjects)",
                    js.stream
                ));
            }
        }
        Protocol::Socketio if w.socketio.as_ref().is_some_and(|s| s.all_room) => {
            shared.push("the Socket.IO room __all__ (socketio.allRoom)".into());
        }
        Protocol::Websocket
            if w.websocket.as_ref().map(|ws| ws.mode) == Some(WebSocketMode::Broadcast) =>
        {
            shared.push("every connection of the server (websocket.mode: broadcast)".into());
        }
        _ => {}
    }
    shared
}

/// The shared names of the run's workload and its variants' (each once).
pub fn of_spec(spec: &BenchmarkRunSpec) -> Vec<String> {
    let variants = spec.variants.iter().filter_map(|v| v.workload.as_ref());
    let workloads = std::iter::once(spec.workload.clone())
        .chain(variants.map(|o| spec.workload.with_override(o)));
    let all: BTreeSet<String> = workloads.flat_map(|w| of_workload(&w)).collect();
    all.into_iter().collect()
}

/// The `NamesShared` message of a run that shares its target, or None when nothing is shared
/// by name. `alongside`: the runs on the target at its start ("" when none yet).
pub fn warning(spec: &BenchmarkRunSpec, alongside: &str) -> Option<String> {
    let names = of_spec(spec);
    if !spec.share_target || names.is_empty() {
        return None;
    }
    Some(format!(
        "this run shares {} with any run that shares its target ({alongside}): their messages \
         reach its subscribers, are counted in status.result.foreign (never as deliveries), and \
         load the server and the subscribers; for figures of this run alone, drop \
         spec.shareTarget or give it names of its own",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(yaml: &str) -> Workload {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn only_names_a_run_id_cannot_make_its_own_are_shared() {
        let own = [
            "{protocol: jetstream}",
            "{protocol: jetstream, jetstream: {createStream: true}}",
            "{protocol: socketio}",
            "{protocol: websocket}",
            "{protocol: nats}",
            "{protocol: mqtt}",
        ];
        for w in own {
            assert_eq!(of_workload(&workload(w)), Vec::<String>::new(), "{w}");
        }
        let shared = [
            (
                "{protocol: jetstream, jetstream: {stream: ORDERS, createStream: false}}",
                "stream ORDERS",
            ),
            (
                "{protocol: socketio, socketio: {allRoom: true}}",
                "room __all__",
            ),
            (
                "{protocol: websocket, websocket: {mode: broadcast}}",
                "every connection",
            ),
        ];
        for (w, what) in shared {
            let names = of_workload(&workload(w));
            assert!(
                names.len() == 1 && names[0].contains(what),
                "{w}: {names:?}"
            );
        }
    }
}
