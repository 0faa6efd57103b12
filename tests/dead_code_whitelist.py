"""Names the dead-code scan (vulture) cannot see used: what a framework calls.

``tests/test_dead_code.py`` runs vulture over ``src/torchwise`` with this file.
Vulture counts a name as used when it appears here, so each line below names
something called by name or by protocol, never from our own code, and says by
what. Registration decorators (``@rule``, ``@check``, ``@opcode``, ``@register``,
click's commands) and the review engine's ``visit_*``/``leave_*`` hooks are
passed to vulture as options instead. Anything else vulture finds is dead: delete it.
"""

# ruff: noqa: B018, F821
# mypy: ignore-errors

# the doctor registry imports each check class from its "module:Class" string
AmpDrift, BatchIndependence, CausalLeak, DeadUnits, Determinism, DeviceConsistency
EvalDeterminism, Exportable, GradFlow, GradScale, InitLoss, NanInf, OverfitBatch
ParamUpdate, TrainEvalGap, Wiring

# pickle calls a restricted Unpickler's find_class; pickle opcodes set the protocol
_.find_class
_.protocol

# click calls a MultiCommand's list_commands, get_command and format_commands
_.list_commands
_.get_command
_.format_commands
# click passes every option as a keyword argument (--stdio is the LSP's default transport)
stdio

# PEP 562 module __getattr__: lazy attributes of torchwise.doctor and torchwise.zoo
__getattr__

# the child process of torchwise.isolation sets the interpreter's flag
_.dont_write_bytecode

# pydantic models: fields serialized into the MCP and project JSON
training_passes, evaluation_passes, output_tail
schema_version, configured_models, training_memory_bytes, unsafe_included

# the MCP server's tools and resources, registered by its decorators
explain_rule, rules_index, knowledge_json

# the language server's features, registered by pygls decorators
initialize, initialized, did_open, did_change, did_save, did_close
notebook_open, notebook_change, notebook_save, notebook_close, hover, code_action

# the rule and check documentation contracts, read by their tests and docs/run.md's index
REQUIRED_HEADINGS, FIX_HEADING, markdown_index

# run's GradScaler monitor looks its wrappers up by name: getattr(self, f"_wrap_{name}")
_._wrap_init, _._wrap_scale, _._wrap_unscale, _._wrap_step, _._wrap_update

# the simulated torch.cuda answers what a user's script asks of the real one
total_memory, multi_processor_count, is_integrated, is_multi_gpu_board, L2_cache_size, uuid
enable_timing
_.elapsed_time, _.wait_event, _.record_event
# torch's signatures, mirrored: DataParallel's dp argument, mp.spawn's start_method
dp, start_method
# what torch's mp.spawn(join=False) returns has pids()
_.pids

# tune's profile rows and totals go into the JSON report through __dict__
self_s

# the contract generator (scripts/contracts) folds its guards with it
referenced

# run's stand-ins: assigning __class__ turns a half-built dataset into its stand-in
# subclass; the tokenizers library reads a Tokenizer's pre_tokenizer when it encodes
_.__class__
_.pre_tokenizer
