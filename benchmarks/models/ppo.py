"""PPO: proximal policy optimisation (clipped objective) on gymnasium's CartPole-v1.

A step is one PPO iteration: a rollout of ``horizon`` environment steps in Python that calls
the policy (``act``) once per step and samples the action with a numpy generator, GAE
advantages computed in numpy, then several epochs of shuffled minibatch updates
(``train_step``). The clip range lives on the agent and is annealed linearly after every
iteration (a Python float the training step reads); episode counts and rewards live on the
agent too. The symbolic baseline uses the same Python rollout with a fixed-signature
``tf.function`` policy and training step that takes the clip range as an argument.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import tensorflow as tf

keras = tf.keras

NAME = "ppo"
UNIT = "env steps/s"
SCALING = (
    "The paper trains PPO with parallel environments; here: one CartPole-v1 environment, 128-step rollouts, "
    "4 epochs of 64-sample minibatches on a 64-unit two-layer actor-critic MLP with Adam (quick: 64 steps, "
    "2 epochs of 32, 32 units)."
)
DYNAMIC = (
    "Python loops interleaving environment steps and policy calls, episodes of data-dependent length, "
    "minibatch loops; impure function (the annealed clip range, episode counters and rewards on the agent)"
)

GAMMA, LAMBDA, CLIP, ENTROPY, VALUE, MAX_NORM, ANNEAL_ITERATIONS = 0.99, 0.95, 0.2, 0.01, 0.5, 0.5, 500


@dataclasses.dataclass(frozen=True)
class Config:
    horizon: int
    epochs: int
    minibatch: int
    hidden: int


CONFIGS = {False: Config(horizon=128, epochs=4, minibatch=64, hidden=64), True: Config(64, 2, 32, 32)}


class ActorCritic(keras.Model):
    def __init__(self, hidden: int, actions: int) -> None:
        super().__init__()
        self.body = keras.Sequential([keras.layers.Dense(hidden, activation="tanh") for _ in range(2)])
        self.policy = keras.layers.Dense(actions)
        self.value = keras.layers.Dense(1)

    def call(self, obs):
        h = self.body(obs)
        return self.policy(h), tf.squeeze(self.value(h), -1)


class Agent:
    def __init__(self, cfg: Config, seed: int) -> None:
        self.model = ActorCritic(cfg.hidden, 2)
        self.model(tf.zeros([1, 4]))
        self.opt = keras.optimizers.Adam(3e-4)
        self.opt.build(self.model.trainable_variables)
        self.env = gym.make("CartPole-v1")
        self.obs, _ = self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.clip_range = CLIP
        self.iterations = 0
        self.episodes = 0
        self.episode_reward = 0.0
        self.last_rewards: list[float] = []


@dataclasses.dataclass
class Program:
    cfg: Config
    agent: Agent


def items_per_step(quick: bool) -> float:
    return float(CONFIGS[quick].horizon)


def build(quick: bool, seed: int = 0) -> Program:
    cfg = CONFIGS[quick]
    keras.utils.set_random_seed(seed)
    return Program(cfg, Agent(cfg, seed))


def iteration(program: Program, act, train_step) -> tuple:
    """Rollout, GAE, minibatch epochs: runs the environment, so it stays plain Python."""
    agent, cfg = program.agent, program.cfg
    obs, actions, log_probs, values, rewards, dones = [], [], [], [], [], []
    for _ in range(cfg.horizon):
        probs, value = act(tf.constant(agent.obs))
        p = probs.numpy().astype(np.float64)
        action = int(agent.rng.choice(len(p), p=p / p.sum()))
        next_obs, reward, terminated, truncated, _ = agent.env.step(action)
        obs.append(agent.obs)
        actions.append(action)
        log_probs.append(np.log(p[action]))
        values.append(float(value))
        rewards.append(reward)
        dones.append(terminated or truncated)
        agent.episode_reward += reward
        if terminated or truncated:
            agent.episodes += 1
            agent.last_rewards = (agent.last_rewards + [agent.episode_reward])[-10:]
            agent.episode_reward = 0.0
            next_obs, _ = agent.env.reset()
        agent.obs = next_obs
    # generalised advantage estimation, backwards over the rollout
    next_value = 0.0 if dones[-1] else float(act(tf.constant(agent.obs))[1])
    advantages = np.zeros(cfg.horizon, np.float32)
    gae = 0.0
    for t in reversed(range(cfg.horizon)):
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + GAMMA * next_value * nonterminal - values[t]
        gae = delta + GAMMA * LAMBDA * nonterminal * gae
        advantages[t] = gae
        next_value = values[t]
    returns = advantages + np.asarray(values, np.float32)
    obs, actions, log_probs = np.stack(obs), np.asarray(actions, np.int32), np.asarray(log_probs, np.float32)
    losses = []
    for _ in range(cfg.epochs):
        order = agent.rng.permutation(cfg.horizon)
        for start in range(0, cfg.horizon, cfg.minibatch):
            idx = order[start : start + cfg.minibatch]
            batch = (obs[idx], actions[idx], log_probs[idx], advantages[idx], returns[idx])
            losses.append(train_step(*map(tf.constant, batch)))
    agent.iterations += 1
    agent.clip_range = CLIP * max(0.0, 1.0 - agent.iterations / ANNEAL_ITERATIONS)
    return tf.stack(losses), agent.episodes


def imperative(program: Program, wrap):
    agent = program.agent
    model, opt = agent.model, agent.opt

    def act(obs):
        logits, value = model(obs[None])
        return tf.nn.softmax(logits[0]), value[0]

    def train_step(obs, actions, old_log_probs, advantages, returns):
        advantages = (advantages - tf.reduce_mean(advantages)) / (tf.math.reduce_std(advantages) + 1e-8)
        with tf.GradientTape() as tape:
            logits, values = model(obs)
            log_probs = tf.nn.log_softmax(logits)
            ratio = tf.exp(tf.gather(log_probs, actions, batch_dims=1) - old_log_probs)
            clipped = tf.clip_by_value(ratio, 1.0 - agent.clip_range, 1.0 + agent.clip_range)
            policy_loss = -tf.reduce_mean(tf.minimum(ratio * advantages, clipped * advantages))
            value_loss = 0.5 * tf.reduce_mean(tf.square(returns - values))
            entropy = -tf.reduce_mean(tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1))
            loss = policy_loss + VALUE * value_loss - ENTROPY * entropy
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, MAX_NORM)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    act, train_step = wrap(act), wrap(train_step)
    return lambda: iteration(program, act, train_step)


def symbolic(program: Program):
    agent, cfg = program.agent, program.cfg
    model, opt = agent.model, agent.opt
    variables = model.trainable_variables
    mb = tf.TensorSpec([cfg.minibatch])

    @tf.function(input_signature=[tf.TensorSpec([4])], autograph=False)
    def act(obs):
        logits, value = model(obs[None])
        return tf.nn.softmax(logits[0]), value[0]

    @tf.function(
        input_signature=[tf.TensorSpec([cfg.minibatch, 4]), tf.TensorSpec([cfg.minibatch], tf.int32), mb, mb, mb]
        + [tf.TensorSpec([], tf.float64)],
        autograph=False,
    )
    def train(obs, actions, old_log_probs, advantages, returns, clip_range):
        advantages = (advantages - tf.reduce_mean(advantages)) / (tf.math.reduce_std(advantages) + 1e-8)
        low, high = tf.cast(1.0 - clip_range, tf.float32), tf.cast(1.0 + clip_range, tf.float32)
        with tf.GradientTape() as tape:
            logits, values = model(obs)
            log_probs = tf.nn.log_softmax(logits)
            ratio = tf.exp(tf.gather(log_probs, actions, batch_dims=1) - old_log_probs)
            clipped = tf.clip_by_value(ratio, low, high)
            loss = (
                -tf.reduce_mean(tf.minimum(ratio * advantages, clipped * advantages))
                + VALUE * 0.5 * tf.reduce_mean(tf.square(returns - values))
                + ENTROPY * tf.reduce_mean(tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1))
            )
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), MAX_NORM)
        opt.apply_gradients(zip(grads, variables))
        return loss

    def train_step(*batch):
        return train(*batch, tf.constant(agent.clip_range, tf.float64))

    return lambda: iteration(program, act, train_step)


def weights(program: Program) -> list:
    agent = program.agent
    return [
        *agent.model.trainable_variables,
        *agent.opt.variables,
        agent.obs,
        agent.clip_range,
        agent.iterations,
        agent.episodes,
        agent.episode_reward,
        agent.last_rewards,
    ]
