"""Setup for platonic-ta: everything comes from settings.ini (nbdev 2 layout)."""
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['Pre-Alpha', 'Alpha', 'Beta', 'Production/Stable', 'Mature', 'Inactive']
lic = licenses[cfg['license'].lower()]
requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
ray_requirements = shlex.split(cfg.get('ray_requirements', ''))   # `pip install platonic_ta[ray]`: sweeps on Ray
audio_requirements = shlex.split(cfg.get('audio_requirements', ''))   # `pip install platonic_ta[audio]`: CLAP towers
lab_requirements = shlex.split(cfg.get('lab_requirements', ''))   # `pip install platonic_ta[lab]`: JupyterLab, the browser test

setuptools.setup(
    name=cfg['lib_name'],
    license=lic[0],
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'License :: ' + lic[1],
        'Natural Language :: ' + cfg['language'].title(),
        'Programming Language :: Python :: 3',
    ],
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=['platonic_ta', 'platonic_ta.*']),
    include_package_data=True,
    package_data={'platonic_ta': ['data/*', 'data/**/*']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements + audio_requirements, 'ray': ray_requirements, 'audio': audio_requirements,
                    'lab': lab_requirements},
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f"{cfg.get('lib_path')}={cfg.get('lib_path')}._modidx:d"]},
    version=cfg['version'],
    author=cfg['author'], author_email=cfg['author_email'], description=cfg['description'],
)
