"""Storage and domain rules of jobpost, shared by the API and the workers."""
