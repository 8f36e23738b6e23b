"""Every metric plmbench reports, in one package that imports only ``datamodules.errors`` and the
libraries that compute them (torchmetrics, seqeval, scikit-learn ...), so every layer may use it:
``classification`` (accuracy, F1s, Matthews; Pearson and Spearman for regression), ``squad``
(the official SQuAD v1.1/v2.0 EM and F1), ``exact_match`` (open-domain QA, string or regex
answers), ``rouge`` (ROUGE-1/2/L/Lsum), ``tagging`` (seqeval's entity P/R/F1) and ``retrieval``
(DPR's answer recall@k and MRR)."""
