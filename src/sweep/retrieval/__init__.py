"""Retrieval, one module per config group: chunking, embedding, dense and lexical models, indexes, filters, rerankers, the pipeline."""
