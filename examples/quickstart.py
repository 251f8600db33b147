import tensorflow as tf

import janus

model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)])
opt = tf.keras.optimizers.SGD(0.01)


@janus.jit  # the only change to an eager program
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x, training=True)))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for _ in range(50):
    x, y = tf.random.normal([32, 20]), tf.random.uniform([32], 0, 10, tf.int32)
    loss = train_step(x, y)
print(f"loss {float(loss):.4f}", janus.stats(train_step))
