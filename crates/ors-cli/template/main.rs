//! An Open Reward Standard environment made by `ors new`: find a hidden number, told "higher"
//! or "lower" after each guess. `cargo run` serves it on http://127.0.0.1:8080 (`ORS_PORT`
//! and `ORS_HOST` change that); `ors check` then says whether it is ready for training.

use ors_server::prelude::*;

/// A task: a hidden whole number from 1 to `max`.
#[wire]
struct Secret {
    /// The number to find.
    number: i64,
    /// The largest number it can be.
    max: i64,
}

/// The input of `guess`.
#[wire]
struct Guess {
    /// Your guess, a whole number.
    number: i64,
}

/// What the server starts with, shared by every episode (`type State`): here the number of
/// guesses an episode allows. A data file, a client or a sandbox pool would go here too.
struct Rules {
    max_guesses: u32,
}

/// One episode: its task and the guesses it has left.
struct Game {
    secret: Secret,
    guesses_left: u32,
}

#[environment(name = "template")]
impl Environment for Game {
    type Task = Secret;
    type State = Rules;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test")]
    }

    async fn tasks(split: &str) -> Result<Vec<Secret>, EnvError> {
        // Train on numbers up to 100, test up to 1000: a policy must halve the range, not guess.
        let max = if split == "train" { 100 } else { 1000 };
        Ok((0..20)
            .map(|i| Secret {
                number: 1 + (i * 389 + 7) % max,
                max,
            })
            .collect())
    }

    async fn new(rules: &Rules, secret: Secret, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            secret,
            guesses_left: rules.max_guesses,
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(format!(
            "I am thinking of a whole number from 1 to {}. Find it with the `guess` tool: after \
             each wrong guess I say whether it is higher or lower. You have {} guesses.",
            self.secret.max, self.guesses_left
        ))])
    }

    /// Guess the hidden number. A wrong guess is answered "higher" or "lower"; the right one
    /// ends the episode with reward 1, and the last wrong one with reward 0.
    #[tool]
    fn guess(&mut self, input: Guess) -> ToolOutput {
        self.guesses_left = self.guesses_left.saturating_sub(1);
        let (guess, number) = (input.number, self.secret.number);
        if guess == number {
            return ToolOutput::text(format!("{guess} is right!"))
                .with_reward(1.0)
                .finish();
        }
        let hint = if guess < number { "higher" } else { "lower" };
        match self.guesses_left {
            0 => ToolOutput::text(format!(
                "No, it is {hint}; that was your last guess (it was {number})."
            ))
            .with_reward(0.0)
            .finish(),
            left => ToolOutput::text(format!(
                "No, it is {hint} than {guess}. Guesses left: {left}."
            ))
            .with_reward(0.0),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), ors_server::ServerError> {
    ors_server::init_tracing(); // logs to stderr; RUST_LOG=ors_server=debug shows every request
    ors_server::Server::new()
        .environment_with::<Game>(Rules { max_guesses: 10 })
        .serve_from_env()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_server::core::BlockText;
    use ors_server::runtime::env::EnvHandle;

    /// Plays episodes in-process, through the calls a server makes: halving the range finds
    /// every number from 1 to 1000 within the 10 guesses, and each wrong guess points the way.
    #[tokio::test]
    async fn halving_the_range_always_wins() {
        let game = EnvHandle::<Game>::new(Rules { max_guesses: 10 });
        for number in [1, 2, 500, 777, 999, 1000] {
            let mut episode = game
                .episode(Secret { number, max: 1000 }, Secrets::default())
                .await
                .unwrap();
            let (mut low, mut high) = (1, 1000);
            let out = loop {
                let guess = (low + high) / 2;
                let input = serde_json::json!({ "number": guess });
                let out = episode
                    .call(ToolContext::detached(), "guess", input)
                    .await
                    .into_result()
                    .unwrap();
                match out.text() {
                    t if t.contains("higher") => low = guess + 1,
                    t if t.contains("lower") => high = guess - 1,
                    _ => break out,
                }
                assert!(
                    !out.finished,
                    "{number}: finished after {guess}: {}",
                    out.text()
                );
            };
            assert_eq!(
                (out.reward, out.finished),
                (Some(1.0), true),
                "{number}: {}",
                out.text()
            );
        }
    }

    /// The tenth wrong guess ends the episode with reward 0.
    #[tokio::test]
    async fn ten_wrong_guesses_lose() {
        let game = EnvHandle::<Game>::new(Rules { max_guesses: 10 });
        let mut episode = game
            .episode(
                Secret {
                    number: 7,
                    max: 100,
                },
                Secrets::default(),
            )
            .await
            .unwrap();
        for n in 1..=10 {
            let input = serde_json::json!({ "number": 50 });
            let out = episode
                .call(ToolContext::detached(), "guess", input)
                .await
                .into_result()
                .unwrap();
            assert_eq!(out.finished, n == 10, "guess {n}: {}", out.text());
            assert_eq!(out.reward, Some(0.0));
        }
    }
}
