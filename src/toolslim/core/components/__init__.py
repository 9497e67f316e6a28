"""The components, each one declared step of the pipeline."""
