"""Local models through Hugging Face transformers, grammar-constrained, with perturbed ballots.

    _embedded      the embedded SmolLM2-135M-Instruct (``accord.models.local()``)
    _backend       TransformersBackend: identity, generation, noise floors
    _load          a model and tokenizer from local files: dtype, device, greedy defaults, hashes
    _steps         StepRecorder: per-step margins, chosen-token log-probs, step times
    _perturbed     one generate call under a perturbation
    _calibrate     the noise floors the margin gate and the predictor read
    _constrain     schema -> logits processor, over the engines in _engines (_compile_worker)
"""
