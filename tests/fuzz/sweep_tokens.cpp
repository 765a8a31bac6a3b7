// The words of sweep declarations, inserted by the mutation fuzzer
// (tests/fuzz/mutate_main.cpp) into sweep scripts for the front-end target.
extern const char* const kFuzzTokens[] = {
    "sweep ", " for ", "{", "}", "\n", "method: ", "grid", "random", "bayes", "metric: ", "minimize(", "maximize(", ")",
    "parameters {", "phase.short.lr: ", "optimizer.weight_decay: ", "mapping.replicas: ", "precision.compute: ",
    "model.hidden: ", "[", "]", ", ", "uniform(", "log_uniform(", "q_uniform(", "normal(", "categorical(", "1e-3",
    "0", "-1", "2e308", "run_cap: ", "early_terminate: ", "hyperband(min_iter: ", "eta: ", "from: ", "best(",
    "checkpoint(", "seed: ", "target: ", "eval.loss", "loss", "500 steps", "every_layer", "fp16", "\"text\"", nullptr};
