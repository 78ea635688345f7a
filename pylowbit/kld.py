"""KL divergence against a base run, the llama-perplexity way: the names this module had, now in
pylowbit.eval.kld_stats (the statistics) and pylowbit.eval.base_file (the base file)."""
from pylowbit.eval.base_file import (HEADER_BYTES, LOG_PROB_RANGE, MAGIC, BaseFile, BaseFileError,  # noqa: F401
                                     BaseWriter, base_file_size, check_free_disk, compress_log_probs,
                                     decode_base_row, row_width, scored_per_chunk)
from pylowbit.eval.kld_stats import (DP_PERCENTILES, KLD_PERCENTILES, KLDAccumulator, KLDStats,  # noqa: F401
                                     side_by_side)
from pylowbit.eval.kld_stats import kl_divergence_of_logits as kl_divergence  # noqa: F401
