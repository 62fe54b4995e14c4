"""torch.cuda APIs, device strings and arguments, CUDA environment variables."""
