"""Builders of the pretrained assets the configs point to: encoder weights
(:mod:`.encoders`), word vectors (:mod:`.vectors`) and the generator model
(:mod:`.generator_model`). Each reads a package installed with pip and
writes a local folder; nothing here runs inside a pipeline.
"""
