//! Counterexamples as readable histories, and the one way every model is
//! checked (so the tests, the deep target and the mutation tests agree).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model, Path};

/// A model that can tell what one step did: who did what, which write
/// was refused against which old item, what was answered.
pub trait Narrate: Model {
    /// One line (or a few) for the step from `before` by `action` to
    /// `after`.
    fn narrate(&self, before: &Self::State, action: &Self::Action, after: &Self::State) -> String;
    /// What the state shows at the end of the history (the store, the
    /// callers, the ghost flags that broke).
    fn summary(&self, state: &Self::State) -> String;
}

/// A discovery path as a numbered history, ending with the final state.
pub fn history<M: Narrate>(model: &M, path: Path<M::State, M::Action>) -> String {
    let steps = path.into_vec();
    let mut out = String::new();
    let mut n = 0;
    for pair in steps.windows(2) {
        let (before, Some(action)) = (&pair[0].0, &pair[0].1) else {
            continue;
        };
        n += 1;
        let _ = writeln!(out, "{n:>3}. {}", model.narrate(before, action, &pair[1].0));
    }
    if let Some((last, _)) = steps.last() {
        let _ = writeln!(out, "  => {}", model.summary(last));
    }
    out
}

/// What one check found.
pub struct Report {
    /// States generated (with repeats) and distinct ones.
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// Property name -> the history that broke it (an `always` property)
    /// or showed it (a `sometimes` one).
    pub discoveries: Vec<(&'static str, usize, String)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} states ({} unique), depth {}, {:.2?}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )?;
        for (name, len, h) in &self.discoveries {
            writeln!(f, "-- {name} ({len} steps):\n{h}")?;
        }
        Ok(())
    }
}

/// Check `model` exhaustively, breadth first, on two threads, until every
/// state is seen, or (with `stop_at_failure`, on one thread, so that the
/// counterexample is a shortest one) until an `always` property fails.
pub fn check<M>(model: M, stop_at_failure: bool) -> (M, Report)
where
    M: Narrate + Clone + Send + Sync + 'static,
    M::State: std::hash::Hash + std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
{
    let started = Instant::now();
    // A mutation's check runs on one thread: breadth first on one thread
    // is strictly level by level, so its counterexample is a shortest one.
    let threads = if stop_at_failure { 1 } else { 2 };
    let mut builder = model.clone().checker().threads(threads);
    if stop_at_failure {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = builder.spawn_bfs().join();
    let mut discoveries: Vec<_> = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let len = path.clone().into_actions().len();
            (name, len, history(&model, path))
        })
        .collect();
    discoveries.sort_by_key(|d| d.0);
    let report = Report {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed: started.elapsed(),
        discoveries,
    };
    (model, report)
}

/// Check `model` and require: every `always` property holds, every
/// `sometimes` property is shown (the model is not vacuous). Prints the
/// report (nextest shows it on failure, `--no-capture` always).
pub fn assert_holds<M>(model: M) -> Report
where
    M: Narrate + Clone + Send + Sync + 'static,
    M::State: std::hash::Hash + std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
{
    let props = model.properties();
    let (_, report) = check(model, false);
    println!("{report}");
    for p in props {
        let found = report.discoveries.iter().find(|d| d.0 == p.name);
        match p.expectation {
            stateright::Expectation::Always => {
                if let Some((_, _, h)) = found {
                    panic!("property `{}` fails:\n{h}", p.name);
                }
            }
            stateright::Expectation::Sometimes => {
                assert!(
                    found.is_some(),
                    "`{}` is never shown: the model is vacuous there",
                    p.name
                );
            }
            stateright::Expectation::Eventually => {
                if let Some((_, _, h)) = found {
                    panic!("property `{}` fails:\n{h}", p.name);
                }
            }
        }
    }
    report
}

/// Check a mutated `model` and require that the `always` property
/// `name` fails; returns the counterexample's length and history.
pub fn assert_caught<M>(model: M, name: &'static str) -> (usize, String)
where
    M: Narrate + Clone + Send + Sync + 'static,
    M::State: std::hash::Hash + std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static,
{
    let (_, report) = check(model, true);
    println!("{report}");
    let failed: Vec<_> = report
        .discoveries
        .iter()
        .filter(|d| !d.0.starts_with("sometimes"))
        .collect();
    let Some((_, len, h)) = failed.iter().find(|d| d.0 == name) else {
        panic!(
            "the mutation was not caught by `{name}` (failed instead: {:?})",
            failed.iter().map(|d| d.0).collect::<Vec<_>>()
        );
    };
    (*len, h.clone())
}

/// Larger bounds for `make model-check-deep` (MODEL_CHECK_DEEP=1).
pub fn deep() -> bool {
    std::env::var_os("MODEL_CHECK_DEEP").is_some_and(|v| v != "0")
}
