"""GPU node lifecycle: ready before taking work, watched while it runs, repaired when a GPU breaks."""
