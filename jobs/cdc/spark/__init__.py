"""The one SparkSession factory and its JVM: jars, the class-data cache, the local file system, Py4J."""
