//! `ors eval --policy random`: schema-valid random tool calls, the baseline a trained policy is
//! compared against and a smoke test of the eval loop on any environment without a model.

use ors_client::{Action, Call, Observation, Policy, PolicyError};
use ors_conformance::check::fuzz;
use ors_conformance::check::rng::{hash_str, Rng};

/// Each step calls one tool picked at random (the terminal tool among them, with a random
/// answer, which ends the episode as a model's answer in prose does) with an input generated
/// from its `input_schema`; nothing else ends an episode but `finished` and the step limit.
/// Its number is the seed (`--seed`).
#[derive(Debug, Clone, Copy)]
pub struct RandomPolicy(pub u64);

impl Policy for RandomPolicy {
    type State = Rng;

    /// Each episode draws from a generator of its own, seeded by the seed, the split, the task
    /// and the sample: its calls do not depend on which episodes ran beside it, or in what
    /// order.
    fn start(&self, obs: Observation<'_>) -> Rng {
        let episode = format!("{}\n{}\n{}", obs.split, obs.index, obs.sample);
        Rng::new(self.0 ^ hash_str(&episode))
    }

    async fn act(&self, rng: &mut Rng, obs: Observation<'_>) -> Result<Action, PolicyError> {
        let choices = obs.tools.len() + usize::from(obs.terminal_tool.is_some());
        if choices == 0 {
            return Err("the environment lists no tools to call".into());
        }
        let i = rng.below(choices);
        Ok(match obs.tools.get(i) {
            Some(tool) => Action::call(
                &tool.name,
                fuzz::valid_input(tool.input_schema.as_ref(), rng),
            ),
            None => match obs.terminal_tool {
                Some(term) => Action::Final(Call::new(&term.name, term.input(&fuzz::text(rng)))),
                None => Action::stop(),
            },
        })
    }
}
