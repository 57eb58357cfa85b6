//! The counts of what each converted record holds, kept as a run goes and added into its
//! [`Summary`] once, when the summary is written.

use rustc_hash::FxHashMap;

use crate::audit::summary::bump;
use crate::audit::Summary;
use crate::model::rule::RuleRef;

/// The summary's counts of what each converted record holds (its items and their phases,
/// its events, its decisions by rule and action), kept in hash maps as the run goes and
/// added into the summary's sorted maps once, when it is written: counted straight into
/// them, each of a record's ~14 counts was a B-tree's string compares (~130 instructions),
/// on the collector's thread that every record waits on.
#[derive(Default)]
pub(crate) struct Tally {
    items: FxHashMap<&'static str, u64>,
    /// Of `message:assistant` items, by phase (`none` without one).
    phases: FxHashMap<&'static str, u64>,
    /// User and agent message events, once a record was converted.
    events: Option<(u64, u64)>,
    /// By action name, then by rule.
    decisions: FxHashMap<&'static str, FxHashMap<RuleRef, u64>>,
}

impl Tally {
    /// Counts one converted record: its items (kind, phase, count), its user and agent
    /// events, its decisions.
    pub(crate) fn count(
        &mut self,
        items: &[(&'static str, Option<&'static str>, u64)],
        events: (u64, u64),
        decisions: &[crate::audit::Decision],
    ) {
        for &(kind, phase, count) in items {
            *self.items.entry(kind).or_insert(0) += count;
            if kind == "message:assistant" {
                *self.phases.entry(phase.unwrap_or("none")).or_insert(0) += count;
            }
        }
        let tallied = self.events.get_or_insert((0, 0));
        tallied.0 += events.0;
        tallied.1 += events.1;
        for decision in decisions {
            let by_rule = self.decisions.entry(decision.action.name()).or_default();
            match by_rule.get_mut(&decision.rule) {
                Some(count) => *count += 1,
                None => {
                    by_rule.insert(decision.rule.clone(), 1);
                }
            }
        }
    }

    /// Adds the counts into `summary` (the same maps as counting each record into it makes),
    /// and leaves none to add again.
    pub(crate) fn add_to(&mut self, summary: &mut Summary) {
        let breakdown = &mut summary.breakdown;
        for (kind, count) in self.items.drain() {
            bump(&mut breakdown.items, kind, count);
        }
        for (phase, count) in self.phases.drain() {
            bump(&mut breakdown.phases, phase, count);
        }
        if let Some((users, agents)) = self.events.take() {
            bump(&mut breakdown.events, "user_message", users);
            bump(&mut breakdown.events, "agent_message", agents);
        }
        for (action, by_rule) in self.decisions.drain() {
            let decisions = summary.decisions.entry(action.to_string()).or_default();
            for (rule, count) in by_rule {
                bump(&mut breakdown.rules_fired, &rule, count);
                bump(&mut breakdown.actions, action, count);
                bump(decisions, &rule, count);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::audit::Action;
    use crate::audit::Decision;
    use crate::model::rule::{Builtin, PolicyId};

    /// The summary the tally adds up is the one counting each record straight into the
    /// summary's maps made (the collector's counting before the tally, kept here as the
    /// reference): every count, key and nesting, zero counts included.
    #[test]
    fn the_tally_adds_up_to_counting_each_record() {
        let rules = [
            RuleRef::Policy(PolicyId::ALL[0]),
            RuleRef::Policy(PolicyId::ALL[1]),
            RuleRef::Builtin(Builtin::ALL[0]),
            RuleRef::RoleAliases,
            RuleRef::File("leading-context".to_string()),
            RuleRef::File("policy.x".to_string()),
        ];
        let actions = [
            Action::RefusalAsText,
            Action::ReasoningItem,
            Action::EmptyMessageDropped,
        ];
        let kinds = [
            "message:user",
            "message:assistant",
            "function_call",
            "reasoning",
        ];
        let phases = [None, Some("commentary"), Some("final_answer")];
        let (mut tally, mut tallied) = (Tally::default(), Summary::default());
        let mut reference = Summary::default();
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) as usize % n
        };
        for _ in 0..500 {
            let items: Vec<_> = (0..next(4))
                .map(|_| (kinds[next(4)], phases[next(3)], next(3) as u64))
                .collect();
            let events = (next(3) as u64, next(2) as u64);
            let decisions: Vec<Decision> = (0..next(5))
                .map(|_| Decision {
                    message: None,
                    rule: rules[next(rules.len())].clone(),
                    action: actions[next(actions.len())].clone(),
                    bytes_dropped: 0,
                    bytes_added: 0,
                })
                .collect();
            tally.count(&items, events, &decisions);
            let summary = &mut reference;
            for &(kind, phase, count) in &items {
                bump(&mut summary.breakdown.items, kind, count);
                if kind == "message:assistant" {
                    bump(
                        &mut summary.breakdown.phases,
                        phase.unwrap_or("none"),
                        count,
                    );
                }
            }
            bump(&mut summary.breakdown.events, "user_message", events.0);
            bump(&mut summary.breakdown.events, "agent_message", events.1);
            for decision in &decisions {
                bump(&mut summary.breakdown.rules_fired, &decision.rule, 1);
                bump(&mut summary.breakdown.actions, decision.action.name(), 1);
                let by_rule = summary
                    .decisions
                    .entry(decision.action.name().to_string())
                    .or_default();
                bump(by_rule, &decision.rule, 1);
            }
        }
        tally.add_to(&mut tallied);
        let json = |s: &Summary| serde_json::to_string(s).expect("a summary");
        assert_eq!(json(&tallied), json(&reference));
        // A key counted zero times is in the summary, as its count of 0.
        let mut zero = Tally::default();
        let mut counted = Summary::default();
        zero.count(&[("message:assistant", None, 0)], (0, 0), &[]);
        zero.add_to(&mut counted);
        let zeros = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(zeros(&counted.breakdown.items), ["message:assistant=0"]);
        assert_eq!(zeros(&counted.breakdown.phases), ["none=0"]);
        assert_eq!(
            zeros(&counted.breakdown.events),
            ["agent_message=0", "user_message=0"]
        );
        // Added once: a second call adds nothing.
        tally.add_to(&mut tallied);
        assert_eq!(json(&tallied), json(&reference));
    }
}
