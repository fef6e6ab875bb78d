use ors_client::{BlockText, Client, Error, Provider};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let client = Client::from_env()?; // ORS_URL (default http://127.0.0.1:8080), ORS_API_KEY
    let env = client.environment("gsm8k");
    let tools = env.tools_for(Provider::OpenAi).await?; // hand these to your model
    let session = env.session_at("test", 0).await?; // pings in the background
    println!("{}", session.prompt().await?.text());
    let out = session.call("submit", json!({"answer": "18"})).await?;
    let (text, reward) = (out.text(), out.reward.unwrap_or(0.0));
    println!("{text} (reward {reward}; tools offered: {})", tools.len());
    session.close().await
}
