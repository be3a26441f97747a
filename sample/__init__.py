"""The sample stage: text from a checkpoint, with temperature, top-k and top-p decoding
(`sample.generate`)."""
