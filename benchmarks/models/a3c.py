"""A3C: advantage actor-critic on gymnasium's CartPole-v1, actor-learners taking turns.

Each worker owns an environment copy. A step runs every worker in turn: a rollout of
``t_max`` environment steps in Python that calls the policy (``act``) once per step and
samples the action with the worker's numpy generator, then one update of the shared model
on that trajectory (``train_step``), whose n-step returns are computed backwards over the
rollout inside the step. Episodes end when the pole falls, so their lengths vary; episode
counts, the current episode's reward and a running reward live on the Python objects. The
symbolic baseline uses the same Python rollout with a fixed-signature ``tf.function`` policy
and training step.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import tensorflow as tf

keras = tf.keras

NAME = "a3c"
UNIT = "env steps/s"
SCALING = (
    "The paper trains A3C with parallel actor-learners; here: one process whose 4 workers (own CartPole-v1 "
    "copies) take turns, each doing a 20-step rollout and an RMSProp update of a shared 128-unit actor-critic "
    "MLP (quick: 2 workers x 10 steps, 32 units)."
)
DYNAMIC = (
    "Python loops interleaving environment steps and policy calls, episodes of data-dependent length; "
    "dynamic control flow (n-step returns computed by a Python loop over the rollout inside the training "
    "step); impure function (episode counters and rewards on the worker objects)"
)

GAMMA, ENTROPY, VALUE, MAX_NORM = 0.99, 0.01, 0.5, 40.0


@dataclasses.dataclass(frozen=True)
class Config:
    workers: int
    t_max: int
    hidden: int


CONFIGS = {False: Config(workers=4, t_max=20, hidden=128), True: Config(workers=2, t_max=10, hidden=32)}


class ActorCritic(keras.Model):
    def __init__(self, hidden: int, actions: int) -> None:
        super().__init__()
        self.body = keras.layers.Dense(hidden, activation="relu")
        self.policy = keras.layers.Dense(actions)
        self.value = keras.layers.Dense(1)

    def call(self, obs):
        h = self.body(obs)
        return self.policy(h), tf.squeeze(self.value(h), -1)


class Worker:
    def __init__(self, seed: int) -> None:
        self.env = gym.make("CartPole-v1")
        self.obs, _ = self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.episode_reward = 0.0
        self.episodes = 0


@dataclasses.dataclass
class Program:
    cfg: Config
    model: ActorCritic
    opt: object
    workers: list
    running_reward: float = 0.0


def items_per_step(quick: bool) -> float:
    cfg = CONFIGS[quick]
    return float(cfg.workers * cfg.t_max)


def build(quick: bool, seed: int = 0) -> Program:
    cfg = CONFIGS[quick]
    keras.utils.set_random_seed(seed)
    model = ActorCritic(cfg.hidden, 2)
    model(tf.zeros([1, 4]))
    opt = keras.optimizers.RMSprop(7e-4, rho=0.99, epsilon=1e-5)
    opt.build(model.trainable_variables)
    return Program(cfg, model, opt, [Worker(seed + i) for i in range(cfg.workers)])


def rollout(program: Program, worker: Worker, act, train_step):
    """Runs the environment (third-party Python): not something a user hands to a JIT."""
    observations, actions, rewards, dones = [], [], [], []
    for _ in range(program.cfg.t_max):
        probs, _ = act(tf.constant(worker.obs))
        p = probs.numpy().astype(np.float64)
        action = int(worker.rng.choice(len(p), p=p / p.sum()))
        obs, reward, terminated, truncated, _ = worker.env.step(action)
        observations.append(worker.obs)
        actions.append(action)
        rewards.append(reward)
        dones.append(terminated or truncated)
        worker.episode_reward += reward
        if terminated or truncated:
            worker.episodes += 1
            program.running_reward = 0.05 * worker.episode_reward + 0.95 * program.running_reward
            worker.episode_reward = 0.0
            obs, _ = worker.env.reset()
        worker.obs = obs
    bootstrap = tf.zeros([]) if dones[-1] else act(tf.constant(worker.obs))[1]
    return train_step(
        tf.constant(np.stack(observations)),
        tf.constant(actions, tf.int32),
        tf.constant(rewards, tf.float32),
        tf.constant(dones, tf.float32),
        bootstrap,
    )


def imperative(program: Program, wrap):
    model, opt = program.model, program.opt

    def act(obs):
        logits, value = model(obs[None])
        return tf.nn.softmax(logits[0]), value[0]

    def train_step(obs, actions, rewards, dones, bootstrap):
        returns = []
        ret = bootstrap
        for t in reversed(range(rewards.shape[0])):
            ret = rewards[t] + GAMMA * ret * (1.0 - dones[t])
            returns.append(ret)
        returns = tf.stack(returns[::-1])
        with tf.GradientTape() as tape:
            logits, values = model(obs)
            advantages = returns - values
            log_probs = tf.nn.log_softmax(logits)
            chosen = tf.gather(log_probs, actions, batch_dims=1)
            entropy = -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)
            policy_loss = -tf.reduce_mean(chosen * tf.stop_gradient(advantages))
            value_loss = 0.5 * tf.reduce_mean(tf.square(advantages))
            loss = policy_loss + VALUE * value_loss - ENTROPY * tf.reduce_mean(entropy)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, MAX_NORM)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    act, train_step = wrap(act), wrap(train_step)

    def step():
        losses = [rollout(program, worker, act, train_step) for worker in program.workers]
        return losses, sum(w.episodes for w in program.workers)

    return step


def symbolic(program: Program):
    model, opt, cfg = program.model, program.opt, program.cfg
    variables = model.trainable_variables
    T = cfg.t_max

    @tf.function(input_signature=[tf.TensorSpec([4])], autograph=False)
    def act(obs):
        logits, value = model(obs[None])
        return tf.nn.softmax(logits[0]), value[0]

    @tf.function(
        input_signature=[
            tf.TensorSpec([T, 4]), tf.TensorSpec([T], tf.int32), tf.TensorSpec([T]), tf.TensorSpec([T]),
            tf.TensorSpec([]),
        ],
        autograph=False,
    )  # fmt: skip
    def train_step(obs, actions, rewards, dones, bootstrap):
        returns = [None] * T
        ret = bootstrap
        for t in range(T - 1, -1, -1):
            ret = rewards[t] + GAMMA * ret * (1.0 - dones[t])
            returns[t] = ret
        returns = tf.stack(returns)
        with tf.GradientTape() as tape:
            logits, values = model(obs)
            advantages = returns - values
            log_probs = tf.nn.log_softmax(logits)
            chosen = tf.gather(log_probs, actions, batch_dims=1)
            entropy = -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)
            loss = (
                -tf.reduce_mean(chosen * tf.stop_gradient(advantages))
                + VALUE * 0.5 * tf.reduce_mean(tf.square(advantages))
                - ENTROPY * tf.reduce_mean(entropy)
            )
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), MAX_NORM)
        opt.apply_gradients(zip(grads, variables))
        return loss

    def step():
        losses = [rollout(program, worker, act, train_step) for worker in program.workers]
        return losses, sum(w.episodes for w in program.workers)

    return step


def weights(program: Program) -> list:
    state = [*program.model.trainable_variables, *program.opt.variables, program.running_reward]
    for w in program.workers:
        state += [w.obs, w.episode_reward, w.episodes]
    return state
